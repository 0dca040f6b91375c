"""Storages and tensors as a checkpoint's pickle describes them, turned into numpy arrays.

A pickle names each storage by a persistent id and each tensor as a strided view of a
storage; the bytes come from elsewhere in the file. :class:`Storage` and
:class:`TensorRef` stand in for them while unpickling (frozen, so a pickle cannot alter
them afterwards); :func:`materialize` turns each tensor into a numpy view once the
storages' bytes are read, refusing views that reach outside their storage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from spawnml import Limits, ModelLoadError, dtypes

#: ``torch.<Name>Storage`` class names -> the element type they hold; None for bfloat16, which is
#: ml_dtypes', looked up only for a storage holding it (importing ml_dtypes takes most of a second).
STORAGE_DTYPES: dict[str, np.dtype | None] = {
    "DoubleStorage": np.dtype("<f8"),
    "FloatStorage": np.dtype("<f4"),
    "HalfStorage": np.dtype("<f2"),
    "BFloat16Storage": None,
    "LongStorage": np.dtype("<i8"),
    "IntStorage": np.dtype("<i4"),
    "ShortStorage": np.dtype("<i2"),
    "CharStorage": np.dtype("i1"),
    "ByteStorage": np.dtype("u1"),
    "BoolStorage": np.dtype(np.bool_),
    "ComplexFloatStorage": np.dtype("<c8"),
    "ComplexDoubleStorage": np.dtype("<c16"),
}


@dataclass(frozen=True, slots=True)
class StorageType:
    """A ``torch.<Name>Storage`` class as the pickle names it."""

    name: str

    @property
    def dtype(self) -> np.dtype:
        found = STORAGE_DTYPES[self.name]
        return dtypes.bfloat16 if found is None else found


@dataclass(frozen=True, slots=True, eq=False)
class Storage:
    """One storage: its key in the file, element type and size in elements."""

    key: str
    dtype: np.dtype
    numel: int


@dataclass(frozen=True, slots=True, eq=False)
class TensorRef:
    """A tensor: a strided view of ``numel`` elements of a storage."""

    storage: Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def rebuild_tensor(storage: object, offset: object, shape: object, stride: object, *_: object) -> TensorRef:
    """``torch._utils._rebuild_tensor(_v2)``: checks the arguments, ignores grad flags and hooks."""
    if not isinstance(storage, Storage):
        raise ModelLoadError(f"a tensor is built on {type(storage).__name__}, not on a storage")
    shape, stride = _ints(shape, "size"), _ints(stride, "stride")
    if not isinstance(offset, int) or offset < 0 or len(shape) != len(stride) or min(stride, default=0) < 0:
        raise ModelLoadError(
            f"a tensor has an invalid layout: offset {offset!r}, size {shape}, stride {stride}"
        )
    return TensorRef(storage, offset, shape, stride)


def rebuild_parameter(data: object, *_: object) -> object:
    """``torch._utils._rebuild_parameter``: a parameter is its tensor."""
    return data


def materialize(tensor: TensorRef, arrays: dict[str, np.ndarray], limits: Limits, where: str) -> np.ndarray:
    """The numpy view of ``tensor`` into its storage's array, refused if it reaches past its end."""
    storage = tensor.storage
    elements = limits.check_shape(tensor.shape, where)
    last = tensor.offset + sum(
        (dim - 1) * step for dim, step in zip(tensor.shape, tensor.stride, strict=True)
    )
    if elements and last >= storage.numel:
        raise ModelLoadError(
            f"{where} reads element {last:,} of storage {storage.key!r}, which has only {storage.numel:,}"
        )
    if storage.key not in arrays:
        raise ModelLoadError(f"{where} uses storage {storage.key!r}, whose data the file does not hold")
    array = arrays[storage.key]
    base = array[tensor.offset :] if elements else array[:0]
    itemsize = storage.dtype.itemsize
    return np.lib.stride_tricks.as_strided(
        base, tensor.shape, tuple(step * itemsize for step in tensor.stride), writeable=False
    )


def _ints(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, tuple | list) or not all(isinstance(item, int) for item in value):
        raise ModelLoadError(f"a tensor's {what} is {value!r}, not a tuple of integers")
    return tuple(value)
