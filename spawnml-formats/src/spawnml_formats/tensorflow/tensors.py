"""TensorFlow element types, shapes and ``TensorProto`` constants as numpy arrays, bounded."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
from spawnml import Limits, ModelLoadError
from tensorboard.compat.proto import types_pb2


@cache
def tensorflow_dtypes() -> dict[int, np.dtype]:
    """TensorFlow DataType -> numpy dtype, for the types SpawnML reads;
    made on first use, since importing ml_dtypes takes most of a second."""
    import ml_dtypes

    return {
        types_pb2.DT_FLOAT: np.dtype(np.float32),
        types_pb2.DT_DOUBLE: np.dtype(np.float64),
        types_pb2.DT_HALF: np.dtype(np.float16),
        types_pb2.DT_BFLOAT16: np.dtype(ml_dtypes.bfloat16),
        types_pb2.DT_INT8: np.dtype(np.int8),
        types_pb2.DT_INT16: np.dtype(np.int16),
        types_pb2.DT_INT32: np.dtype(np.int32),
        types_pb2.DT_INT64: np.dtype(np.int64),
        types_pb2.DT_UINT8: np.dtype(np.uint8),
        types_pb2.DT_UINT16: np.dtype(np.uint16),
        types_pb2.DT_UINT32: np.dtype(np.uint32),
        types_pb2.DT_UINT64: np.dtype(np.uint64),
        types_pb2.DT_BOOL: np.dtype(np.bool_),
    }


#: The repeated field that holds a TensorProto's values when it has no ``tensor_content``.
_VALUE_FIELDS = {
    types_pb2.DT_FLOAT: "float_val",
    types_pb2.DT_DOUBLE: "double_val",
    types_pb2.DT_HALF: "half_val",
    types_pb2.DT_BFLOAT16: "half_val",
    types_pb2.DT_INT8: "int_val",
    types_pb2.DT_INT16: "int_val",
    types_pb2.DT_INT32: "int_val",
    types_pb2.DT_UINT8: "int_val",
    types_pb2.DT_UINT16: "int_val",
    types_pb2.DT_INT64: "int64_val",
    types_pb2.DT_UINT32: "uint32_val",
    types_pb2.DT_UINT64: "uint64_val",
    types_pb2.DT_BOOL: "bool_val",
}


def element_type(code: int, where: str) -> np.dtype:
    """The numpy dtype of a TensorFlow DataType, refusing the ones SpawnML does not read."""
    if code not in tensorflow_dtypes():
        name = types_pb2.DataType.Name(code) if code in types_pb2.DataType.values() else str(code)
        raise ModelLoadError(f"{where} has element type {name}, which SpawnML does not read")
    return tensorflow_dtypes()[code]


def dims(shape: Any) -> tuple[int, ...] | None:
    """A ``TensorShapeProto`` as a tuple with -1 for unknown dims, or None for an unknown rank."""
    if shape.unknown_rank:
        return None
    return tuple(int(dim.size) for dim in shape.dim)


def decode(tensor: Any, where: str, limits: Limits) -> np.ndarray:
    """The value of a ``TensorProto``, as ``tf.make_ndarray`` reads it, within ``limits``.

    A value list shorter than the shape repeats its last value (how TensorFlow stores
    splats such as ``tf.zeros``); the shape is checked before anything is allocated.
    """
    dtype = element_type(tensor.dtype, where)
    shape = dims(tensor.tensor_shape)
    if shape is None or any(dim < 0 for dim in shape):
        raise ModelLoadError(f"{where} is a constant without a complete shape: {shape}")
    elements = limits.check_shape(shape, where)
    if tensor.tensor_content:
        if len(tensor.tensor_content) != elements * dtype.itemsize:
            raise ModelLoadError(
                f"{where} holds {len(tensor.tensor_content):,} bytes, but its shape {list(shape)} "
                f"of {dtype} needs {elements * dtype.itemsize:,}"
            )
        return np.frombuffer(tensor.tensor_content, dtype).reshape(shape).copy()
    values = getattr(tensor, _VALUE_FIELDS[tensor.dtype])
    if len(values) > elements:
        raise ModelLoadError(f"{where} holds {len(values):,} values for its shape {list(shape)}")
    if tensor.dtype in (types_pb2.DT_HALF, types_pb2.DT_BFLOAT16):
        array = np.asarray(values, np.int64).astype(np.uint16).view(dtype)  # stored as bit patterns
    else:
        array = np.asarray(values).astype(dtype)
    if array.size == elements:
        return array.reshape(shape)
    fill = array[-1] if array.size else np.zeros((), dtype)
    return np.concatenate([array, np.full(elements - array.size, fill, dtype)]).reshape(shape)
