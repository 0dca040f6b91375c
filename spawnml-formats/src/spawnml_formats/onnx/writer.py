"""An IR :class:`spawnml.ir.Graph` written back as an ONNX ``ModelProto``.

The inverse of the lowering: inputs with an initializer default stay listed as inputs,
subgraphs become graph attributes (without opset imports of their own), symbolic dims
become ``dim_param`` and unknown ones are left empty, and the descriptive fields the
loader keeps in ``graph.metadata`` go back to their ``ModelProto`` fields. An attribute
given as an empty list takes its kind from the operator's schema where one is known.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnx
from onnx import (
    AttributeProto,
    GraphProto,
    ModelProto,
    NodeProto,
    TensorProto,
    TypeProto,
    helper,
    numpy_helper,
)
from spawnml import dtypes
from spawnml.ir import OPTIONAL, SEQUENCE, TENSOR, Graph, Node, Value
from spawnml.ops.registry import OperatorRegistry
from spawnml.passes.unfuse import expand_fused

#: Model fields the loader keeps in ``graph.metadata``, and how each is written back.
MODEL_FIELDS = {
    "producer_name": str,
    "producer_version": str,
    "domain": str,
    "model_version": int,
    "doc_string": str,
}
#: Attribute kinds of the schemas, for empty lists.
LIST_KINDS = {
    "ints": AttributeProto.INTS,
    "floats": AttributeProto.FLOATS,
    "strings": AttributeProto.STRINGS,
    "tensors": AttributeProto.TENSORS,
    "graphs": AttributeProto.GRAPHS,
}


def to_model(graph: Graph, operators: OperatorRegistry | None = None) -> ModelProto:
    """The ``ModelProto`` of ``graph``; ``operators`` types empty-list attributes. SpawnML's own
    fused nodes are written as the standard nodes they stand for, so any ONNX runtime reads it."""
    graph = expand_fused(graph)
    writer = _Writer(graph, operators)
    opsets = [helper.make_opsetid(domain, version) for domain, version in sorted(graph.opset_imports.items())]
    model = helper.make_model(writer.graph(graph), opset_imports=opsets)
    model.ir_version = max(
        int(graph.metadata.get("ir_version", 0) or 0), helper.find_min_ir_version_for(opsets, True)
    )
    for key, convert in MODEL_FIELDS.items():
        if key in graph.metadata:
            setattr(model, key, convert(graph.metadata[key]))
    props = {
        key: value for key, value in graph.metadata.items() if key not in MODEL_FIELDS and key != "ir_version"
    }
    helper.set_model_props(model, props)
    return model


def save_model(graph: Graph, path: str | os.PathLike[str], operators: OperatorRegistry | None = None) -> None:
    """Write ``graph`` as an ONNX file (large weights stored inline, up to protobuf's 2 GiB)."""
    onnx.save_model(to_model(graph, operators), str(path))


def type_proto(value: Value) -> TypeProto:
    """The ONNX type of an IR value; an undeclared element is left unset."""
    if value.kind in (SEQUENCE, OPTIONAL):
        proto = TypeProto()
        holder = proto.sequence_type if value.kind == SEQUENCE else proto.optional_type
        holder.SetInParent()
        if value.element is not None:
            holder.elem_type.CopyFrom(type_proto(value.element))
        return proto
    code = TensorProto.UNDEFINED if value.dtype is None else dtypes.to_onnx(value.dtype)
    proto = TypeProto()
    proto.tensor_type.elem_type = code
    if value.shape is not None:
        shape = proto.tensor_type.shape
        shape.SetInParent()
        for dim in value.shape:
            entry = shape.dim.add()
            if isinstance(dim, int):
                entry.dim_value = dim
            elif isinstance(dim, str):
                entry.dim_param = dim
    return proto


def value_info(value: Value) -> onnx.ValueInfoProto:
    """A value's name and type; a tensor of unknown element type is written without a type."""
    info = onnx.ValueInfoProto(name=value.name)
    if value.kind != TENSOR or value.dtype is not None:
        info.type.CopyFrom(type_proto(value))
    return info


def tensor_proto(array: np.ndarray, name: str = "") -> TensorProto:
    """An array as a tensor; strings are written as UTF-8."""
    if array.dtype == dtypes.STRING:
        encoded = np.vectorize(lambda item: item.encode() if isinstance(item, str) else item, otypes=[object])
        array = encoded(array) if array.size else array
    return numpy_helper.from_array(np.asarray(array), name)


class _Writer:
    def __init__(self, graph: Graph, operators: OperatorRegistry | None) -> None:
        self.opsets = graph.opset_imports
        self.operators = operators

    def graph(self, graph: Graph) -> GraphProto:
        return helper.make_graph(
            [self.node(node) for node in graph.nodes],
            graph.name,
            [value_info(value) for value in graph.inputs],
            [value_info(value) for value in graph.outputs],
            [tensor_proto(array, name) for name, array in graph.initializers.items()],
            value_info=[value_info(value) for value in graph.value_info.values() if value.dtype is not None],
        )

    def node(self, node: Node) -> NodeProto:
        proto = helper.make_node(
            node.op_type, node.inputs, node.outputs, name=node.name or None, domain=node.domain
        )
        proto.attribute.extend(self.attribute(node, name, value) for name, value in node.attrs.items())
        return proto

    def attribute(self, node: Node, name: str, value: Any) -> AttributeProto:
        if isinstance(value, Graph):
            return helper.make_attribute(name, self.graph(value))
        if isinstance(value, np.ndarray):
            return helper.make_attribute(name, tensor_proto(value))
        if isinstance(value, Value):
            return helper.make_attribute(name, type_proto(value), attr_type=AttributeProto.TYPE_PROTO)
        if isinstance(value, list):
            return self._list(node, name, value)
        return helper.make_attribute(name, _plain(value))

    def _list(self, node: Node, name: str, value: list[Any]) -> AttributeProto:
        if not value:
            return helper.make_attribute(name, [], attr_type=self._list_kind(node, name))
        first = value[0]
        if isinstance(first, Graph):
            return helper.make_attribute(name, [self.graph(item) for item in value])
        if isinstance(first, np.ndarray):
            return helper.make_attribute(name, [tensor_proto(item) for item in value])
        if isinstance(first, Value):
            protos = [type_proto(item) for item in value]
            return helper.make_attribute(name, protos, attr_type=AttributeProto.TYPE_PROTOS)
        return helper.make_attribute(name, [_plain(item) for item in value])

    def _list_kind(self, node: Node, name: str) -> int:
        schema = None
        if self.operators is not None:
            schema = self.operators.lookup(node.domain, node.op_type, self.opsets.get(node.domain, 1))
        kinds = {attribute.name: attribute.kind for attribute in schema.attributes} if schema else {}
        return LIST_KINDS.get(kinds.get(name, "ints"), AttributeProto.INTS)


def _plain(value: Any) -> Any:
    """A Python number for a numpy scalar or a bool, as protobuf fields want."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    return value.item() if isinstance(value, np.generic) else value
