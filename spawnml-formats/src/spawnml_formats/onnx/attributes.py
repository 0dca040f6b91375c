"""ONNX node attributes to plain Python values.

``INT``/``FLOAT`` become int/float, ``STRING`` becomes str (bytes when it is not UTF-8),
tensors and sparse tensors become dense numpy arrays, graphs become IR graphs, type
protos become an unnamed :class:`spawnml.ir.Value`, and the plural kinds lists of those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onnx import AttributeProto, GraphProto
from spawnml import Limits, ModelLoadError
from spawnml.ir import Graph

from .tensors import TensorReader
from .values import type_value


def attribute_value(
    proto: AttributeProto,
    tensors: TensorReader,
    lower_graph: Callable[[GraphProto, str], Graph],
    where: str,
) -> Any:
    """The Python value of one attribute; ``where`` names it in messages.

    ``lower_graph(body, label)`` lowers a graph attribute; ``label`` is the attribute's
    name, with ``[i]`` appended for the i-th graph of a list.
    """
    if proto.ref_attr_name:
        raise ModelLoadError(
            f"{where} refers to function attribute {proto.ref_attr_name!r} outside a function"
        )
    limits = tensors.limits
    kind = proto.type
    if kind == AttributeProto.INT:
        return proto.i
    if kind == AttributeProto.FLOAT:
        return proto.f
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
    if kind == AttributeProto.INTS:
        return list(proto.ints)
    if kind == AttributeProto.FLOATS:
        return list(proto.floats)
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
