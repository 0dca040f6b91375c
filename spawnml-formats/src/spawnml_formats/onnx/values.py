"""ONNX types to IR values: element types, and shapes with symbolic dimensions.

Dense tensor types become typed tensor values; sequence and optional types become values
of that kind whose ``element`` is the type they hold. Map, sparse and opaque types have
no counterpart in the IR, so such a value is a tensor of unknown type and shape.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from spawnml import InvalidArgumentError, Limits, ModelLoadError, dtypes
from spawnml.ir import OPTIONAL, SEQUENCE, Dim, Shape, Value

from .proto import TensorProto, TensorShapeProto, TypeProto, ValueInfoProto


def element_type(code: int, where: str) -> np.dtype | None:
    """The dtype of an ONNX element type code; None for ``UNDEFINED`` (0)."""
    if code == TensorProto.UNDEFINED:
        return None
    try:
        return dtypes.from_onnx(code)
    except InvalidArgumentError:
        raise ModelLoadError(f"{where} has element type {code}, which SpawnML does not support") from None


def text(value: str | bytes, where: str) -> str:
    """A string field as text; protobuf hands over one that is not valid UTF-8 as ``bytes``."""
    if isinstance(value, bytes):
        raise ModelLoadError(f"{where} is not valid UTF-8 text: {value[:64]!r}")
    return value


def texts(values: Iterable[str | bytes], what: str, where: str) -> list[str]:
    """Repeated string fields as text; the ``i``-th is named ``{what} {i} of {where}`` where refused."""
    return [text(value, f"{what} {i} of {where}") for i, value in enumerate(values)]


def value_from_info(info: ValueInfoProto, limits: Limits, where: str) -> Value:
    """The IR value a ``ValueInfoProto`` declares; ``where`` names it in messages."""
    return type_value(text(info.name, f"name of {where}"), info.type, limits)


def type_value(name: str, proto: TypeProto, limits: Limits) -> Value:
    """An IR value of the given name and ONNX type."""
    which = proto.WhichOneof("value")
    if which == "sequence_type":
        return Value(name, kind=SEQUENCE, element=_element(proto.sequence_type.elem_type, limits))
    if which == "optional_type":
        return Value(name, kind=OPTIONAL, element=_element(proto.optional_type.elem_type, limits))
    if which != "tensor_type":
        return Value(name)
    tensor = proto.tensor_type
    where = f"value {name!r}"
    shape = _shape(tensor.shape, where) if tensor.HasField("shape") else None
    if shape is not None:
        limits.check("rank", len(shape), limits.max_rank, where)
    return Value(name, element_type(tensor.elem_type, where), shape)


def _element(proto: TypeProto, limits: Limits) -> Value | None:
    """The nameless value a container holds; None when its type is not given."""
    return type_value("", proto, limits) if proto.WhichOneof("value") else None


def _shape(proto: TensorShapeProto, where: str) -> Shape:
    return tuple(_dim(dim, f"dim_param {axis} of {where}") for axis, dim in enumerate(proto.dim))


def _dim(proto: TensorShapeProto.Dimension, where: str) -> Dim:
    """``dim_value`` as int, ``dim_param`` as its name; unknown (None) when neither is given.

    Negative sizes, which some old exporters wrote for dynamic dimensions, are unknown too,
    and so is the name ``?``, which some exporters (paddle2onnx) write for "unknown" on
    several axes that need not be equal.
    """
    kind = proto.WhichOneof("value")
    if kind == "dim_value":
        return proto.dim_value if proto.dim_value >= 0 else None
    if kind == "dim_param":
        param = text(proto.dim_param, where)
        return param if param not in ("", "?") else None
    return None
