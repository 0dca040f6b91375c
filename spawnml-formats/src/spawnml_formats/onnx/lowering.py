"""An ONNX ``ModelProto`` lowered to a :class:`spawnml.ir.Graph`.

Decisions the IR leaves to the loader:

- An initializer also listed as a graph input is, from IR version 4 on, an input whose
  default is the initializer (ONNX's overridable initializer): it stays in ``inputs`` and
  in ``initializers``. Before IR version 4 every initializer had to be listed as an input,
  so there such inputs are dropped and the initializer is a plain constant.
- Sparse initializers become dense initializers under the name of their values.
- Node and opset domain ``ai.onnx`` is written ``""``.
- Every string field used as a name, domain or metadata must be UTF-8 text; protobuf hands
  over one that is not as ``bytes``, which is refused with a ``ModelLoadError`` naming it.
- Subgraphs (If, Loop, Scan bodies) share the model's opset imports.
- ``graph.metadata`` holds the model's ``metadata_props`` and, under their field names,
  ``producer_name``, ``producer_version``, ``domain``, ``model_version``, ``doc_string``
  and ``ir_version`` where set; these fields win over a metadata entry of the same key.
"""

from __future__ import annotations

from collections.abc import Container
from pathlib import Path

import numpy as np
from spawnml import Limits, ModelLoadError
from spawnml.ir import DEFAULT_DOMAIN, Graph, Node

from .attributes import attribute_value
from .proto import GraphProto, ModelProto, NodeProto
from .tensors import TensorReader
from .values import text, texts, value_from_info

#: The first IR version in which initializers need not be graph inputs.
OVERRIDABLE_INITIALIZERS_IR_VERSION = 4


def lower_model(model: ModelProto, limits: Limits, folder: Path | None) -> Graph:
    """The IR graph of ``model``; external data is read from inside ``folder``."""
    graph = _Lowering(model, limits, folder).graph(model.graph, depth=0, fallback_name="graph")
    graph.metadata = model_metadata(model, limits)
    return graph


def model_metadata(model: ModelProto, limits: Limits) -> dict[str, str]:
    """The model's metadata entries and descriptive fields, as strings."""
    metadata = {
        text(entry.key, "model metadata key"): text(entry.value, f"model metadata {entry.key!r}")
        for entry in model.metadata_props
    }
    fields = {
        "producer_name": text(model.producer_name, "model producer_name"),
        "producer_version": text(model.producer_version, "model producer_version"),
        "domain": text(model.domain, "model domain"),
        "model_version": str(model.model_version) if model.HasField("model_version") else "",
        "doc_string": text(model.doc_string, "model doc_string"),
        "ir_version": str(model.ir_version),
    }
    metadata.update({key: value for key, value in fields.items() if value})
    for key, value in metadata.items():
        limits.check("string length", len(value), limits.max_string_length, f"model metadata {key!r}")
    return metadata


def _domain(name: str) -> str:
    return DEFAULT_DOMAIN if name == "ai.onnx" else name


def _unique(name: str, seen: Container[str], where: str) -> None:
    if name in seen:
        raise ModelLoadError(f"{where} is given twice")


class _Lowering:
    """Lowers the graphs of one model, counting nodes and tensor elements as it goes."""

    def __init__(self, model: ModelProto, limits: Limits, folder: Path | None) -> None:
        self.limits = limits
        self.tensors = TensorReader(limits, folder)
        self.opset_imports = {
            _domain(text(opset.domain, "opset import domain")): opset.version for opset in model.opset_import
        }
        self.keep_initializer_inputs = model.ir_version >= OVERRIDABLE_INITIALIZERS_IR_VERSION
        self.node_count = 0

    def graph(self, proto: GraphProto, depth: int, fallback_name: str) -> Graph:
        name = text(proto.name, f"name of {fallback_name!r}") or fallback_name
        self.limits.check("subgraph depth", depth, self.limits.max_subgraph_depth, f"graph {name!r}")
        self.node_count += len(proto.node)
        self.limits.check("node count", self.node_count, self.limits.max_nodes)
        initializers: dict[str, np.ndarray] = {}
        for i, tensor in enumerate(proto.initializer):
            key = text(tensor.name, f"name of initializer {i} of graph {name!r}")
            where = f"initializer {key!r} of graph {name!r}"
            _unique(key, initializers, where)
            initializers[key] = self.tensors.dense(tensor, where)
        for i, sparse in enumerate(proto.sparse_initializer):
            key = text(sparse.values.name, f"name of sparse initializer {i} of graph {name!r}")
            where = f"sparse initializer {key!r} of graph {name!r}"
            _unique(key, initializers, where)
            initializers[key] = self.tensors.sparse(sparse, where)
        inputs = [
            value_from_info(info, self.limits, f"input {i} of graph {name!r}")
            for i, info in enumerate(proto.input)
            if self.keep_initializer_inputs or info.name not in initializers
        ]
        value_info = [
            value_from_info(info, self.limits, f"value_info {i} of graph {name!r}")
            for i, info in enumerate(proto.value_info)
        ]
        nodes = [self._node(node, depth, f"node {i} of graph {name!r}") for i, node in enumerate(proto.node)]
        return Graph(
            nodes=nodes,
            inputs=inputs,
            outputs=[
                value_from_info(info, self.limits, f"output {i} of graph {name!r}")
                for i, info in enumerate(proto.output)
            ],
            initializers=initializers,
            value_info={value.name: value for value in value_info},
            opset_imports=dict(self.opset_imports),
            name=name,
        )

    def _node(self, proto: NodeProto, depth: int, where: str) -> Node:
        node = Node(
            text(proto.op_type, f"op_type of {where}"),
            texts(proto.input, "input", where),
            texts(proto.output, "output", where),
            name=text(proto.name, f"name of {where}"),
            domain=_domain(text(proto.domain, f"domain of {where}")),
        )
        if not proto.attribute:
            return node
        label = node.label()

        def lower_body(body: GraphProto, attr_name: str) -> Graph:
            return self.graph(body, depth + 1, fallback_name=f"{label}.{attr_name}")

        names = texts([attr.name for attr in proto.attribute], "name of attribute", f"node {label!r}")
        for attr_name, attr in zip(names, proto.attribute, strict=True):
            if attr_name in node.attrs:
                raise ModelLoadError(f"attribute {attr_name!r} of node {label!r} is given twice")
            node.attrs[attr_name] = attribute_value(attr, self.tensors, lower_body, label)
        return node
