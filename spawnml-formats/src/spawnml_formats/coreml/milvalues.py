"""MIL types and values: tensor types as dtypes and shapes, constant values as numpy arrays.

A value is stored inline (``immediateValue``: typed repeated fields, or raw bytes for the
narrower types) or in a blob file of the package (``blobFileValue``).
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeAlias

import numpy as np
from spawnml import Limits, ModelLoadError
from spawnml.dtypes import STRING

from .blobs import BlobFiles

#: A declared shape: its sizes, None where a size is unknown at load.
Shape: TypeAlias = tuple[int | None, ...]


@cache
def mil_dtypes() -> dict[int, np.dtype]:
    """MIL ``DataType`` -> dtype (the sub-byte and 8-bit float types are not read);
    made on first use, since importing ml_dtypes takes most of a second."""
    import ml_dtypes

    return {
        1: np.dtype(np.bool_),
        2: STRING,
        10: np.dtype(np.float16),
        11: np.dtype(np.float32),
        12: np.dtype(np.float64),
        13: np.dtype(ml_dtypes.bfloat16),
        21: np.dtype(np.int8),
        22: np.dtype(np.int16),
        23: np.dtype(np.int32),
        24: np.dtype(np.int64),
        31: np.dtype(np.uint8),
        32: np.dtype(np.uint16),
        33: np.dtype(np.uint32),
        34: np.dtype(np.uint64),
    }


#: The repeated fields of ``TensorValue`` that hold values of their own type.
_REPEATED = ("floats", "ints", "bools", "longInts", "doubles")


def tensor_type(value_type: Any, limits: Limits, where: str) -> tuple[np.dtype, Shape | None]:
    """The dtype and shape (None where the rank is not fixed) of a MIL tensor ``ValueType``."""
    kind = value_type.WhichOneof("type")
    if kind != "tensorType":
        raise ModelLoadError(f"{where} is of MIL type {kind}; SpawnML reads tensors")
    tensor = value_type.tensorType
    if tensor.dataType not in mil_dtypes():
        raise ModelLoadError(f"{where} has MIL data type {tensor.dataType}, which SpawnML does not read")
    if tensor.rank < 0:
        return mil_dtypes()[tensor.dataType], None
    limits.check("rank", tensor.rank, limits.max_rank, where)
    if len(tensor.dimensions) != tensor.rank:
        raise ModelLoadError(f"{where} has rank {tensor.rank} but {len(tensor.dimensions)} dimensions")
    shape = tuple(
        dim.constant.size if dim.WhichOneof("dimension") == "constant" else None for dim in tensor.dimensions
    )
    limits.check_shape(tuple(dim or 0 for dim in shape), where)
    return mil_dtypes()[tensor.dataType], shape


def value_array(value: Any, blobs: BlobFiles, limits: Limits, where: str) -> np.ndarray:
    """The array a MIL ``Value`` holds, of its declared type and shape."""
    dtype, declared = tensor_type(value.type, limits, where)
    shape = tuple(dim for dim in declared or () if dim is not None)
    if declared is None or len(shape) != len(declared):
        raise ModelLoadError(f"{where} is a constant without a fixed shape")
    kind = value.WhichOneof("value")
    if kind == "blobFileValue":
        return blobs.read(value.blobFileValue.fileName, value.blobFileValue.offset, dtype, shape)
    if kind != "immediateValue" or value.immediateValue.WhichOneof("value") != "tensor":
        raise ModelLoadError(f"{where} holds no tensor value")
    tensor = value.immediateValue.tensor
    stored = tensor.WhichOneof("value")
    count = limits.check_shape(shape, where)
    if (stored == "strings") != (dtype == STRING) and count:
        raise ModelLoadError(f"{where} is declared {dtype} but holds {stored or 'no values'}")
    if stored in _REPEATED:
        array = np.asarray(getattr(tensor, stored).values).astype(dtype)
    elif stored == "strings":
        array = np.asarray(list(tensor.strings.values), STRING)
    elif stored == "bytes":
        raw = tensor.bytes.values
        if len(raw) != count * dtype.itemsize:
            raise ModelLoadError(f"{where} holds {len(raw):,} bytes, not {count:,} {dtype} values")
        array = np.frombuffer(raw, dtype)
    else:
        array = np.zeros(0, dtype)
    if array.size != count:
        raise ModelLoadError(f"{where} holds {array.size:,} values, but its shape {shape} needs {count:,}")
    return array.reshape(shape)
