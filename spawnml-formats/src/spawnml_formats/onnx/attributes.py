"""ONNX node attributes to plain Python values.

``INT``/``FLOAT`` become int/float, ``STRING`` becomes str (bytes when it is not UTF-8),
tensors and sparse tensors become dense numpy arrays, graphs become IR graphs, type
protos become an unnamed :class:`spawnml.ir.Value`, and the plural kinds lists of those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spawnml import Limits, ModelLoadError
from spawnml.ir import Graph

from .proto import AttributeProto, GraphProto
from .tensors import TensorReader
from .values import type_value

#: The kinds whose value is a plain number or list of numbers, and how to read each.
_NUMBERS: dict[int, Callable[[AttributeProto], Any]] = {
    AttributeProto.INT: lambda proto: proto.i,
    AttributeProto.FLOAT: lambda proto: proto.f,
    AttributeProto.INTS: lambda proto: list(proto.ints),
    AttributeProto.FLOATS: lambda proto: list(proto.floats),
}


def attribute_value(
    proto: AttributeProto,
    tensors: TensorReader,
    lower_graph: Callable[[GraphProto, str], Graph],
    node: str,
) -> Any:
    """The Python value of one attribute of the node labelled ``node`` (for messages).

    ``lower_graph(body, label)`` lowers a graph attribute; ``label`` is the attribute's
    name, with ``[i]`` appended for the i-th graph of a list.
    """
    kind = proto.type
    if kind in _NUMBERS and not proto.ref_attr_name:
        return _NUMBERS[kind](proto)
    where = f"attribute {proto.name!r} of node {node!r}"
    if proto.ref_attr_name:
        raise ModelLoadError(
            f"{where} refers to function attribute {proto.ref_attr_name!r} outside a function"
        )
    limits = tensors.limits
    if kind == AttributeProto.STRING:
        return _text(proto.s, limits, where)
    if kind == AttributeProto.TENSOR:
        return tensors.dense(proto.t, where)
    if kind == AttributeProto.SPARSE_TENSOR:
        return tensors.sparse(proto.sparse_tensor, where)
    if kind == AttributeProto.GRAPH:
        return lower_graph(proto.g, proto.name)
    if kind == AttributeProto.TYPE_PROTO:
        return type_value("", proto.tp, limits)
    if kind == AttributeProto.STRINGS:
        return [_text(item, limits, where) for item in proto.strings]
    if kind == AttributeProto.TENSORS:
        return [tensors.dense(item, f"{where}[{i}]") for i, item in enumerate(proto.tensors)]
    if kind == AttributeProto.SPARSE_TENSORS:
        return [tensors.sparse(item, f"{where}[{i}]") for i, item in enumerate(proto.sparse_tensors)]
    if kind == AttributeProto.GRAPHS:
        return [lower_graph(item, f"{proto.name}[{i}]") for i, item in enumerate(proto.graphs)]
    if kind == AttributeProto.TYPE_PROTOS:
        return [type_value("", item, limits) for item in proto.type_protos]
    raise ModelLoadError(f"{where} has attribute type {kind}, which SpawnML does not know")


def _text(raw: bytes, limits: Limits, where: str) -> str | bytes:
    limits.check("string length", len(raw), limits.max_string_length, where)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
