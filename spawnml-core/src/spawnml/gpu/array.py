"""Device tensors: a pooled buffer shared by views, with a shape and an element type."""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ..errors import InvalidArgumentError
from ..kernel.ir import Scalar, f32, f64, i32, u32
from .runtime import Runtime

#: The 4- and 2-bit integers, held as int32 like the other narrow integers; casts to them wrap on
#: the device (:mod:`.narrow`), quantization saturates to their range.
NARROW_INTEGERS = tuple(
    np.dtype(t) for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2)
)
#: The 8- and 4-bit floats, held as float32 (which holds each of their values exactly); casts and
#: quantization to them round on the device (:mod:`.narrow`).
NARROW_FLOATS = tuple(
    np.dtype(t)
    for t in (
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e4m3fnuz,
        ml_dtypes.float8_e5m2,
        ml_dtypes.float8_e5m2fnuz,
        ml_dtypes.float4_e2m1fn,
    )
)
#: How each tensor element type lives on a GPU. WGSL has no 64-bit or 8/16-bit integers, so
#: every signed integer tensor is held as int32 and computed on in int32 (int64 values beyond
#: int32 saturate on upload), unsigned 32- and 64-bit ones as uint32 (uint64 saturating alike),
#: and bool as 0/1. float16 and bfloat16 are held as float32, which holds each of their values
#: exactly: kernels compute in float32, Cast to either rounds on the device, and other results
#: keep float32 precision until read. Reading back narrows to the tensor's own type (rounding to
#: nearest even for the 16-bit floats). float64 is held as itself, on devices with double
#: precision only (:attr:`Runtime.float64 <spawnml.gpu.runtime.Runtime.float64>`).
PHYSICAL: dict[np.dtype, Scalar] = (
    {np.dtype(t): f32 for t in (np.float32, np.float16, ml_dtypes.bfloat16)}
    | {np.dtype(np.float64): f64}
    | {np.dtype(t): i32 for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64, np.bool_)}
    | {np.dtype(t): u32 for t in (np.uint32, np.uint64)}
    | dict.fromkeys(NARROW_INTEGERS, i32)
    | dict.fromkeys(NARROW_FLOATS, f32)
)


def physical(dtype: np.dtype) -> Scalar:
    """The device element type of ``dtype``; refuses types GPUs here do not hold."""
    try:
        return PHYSICAL[np.dtype(dtype)]
    except KeyError:
        held = ", ".join(str(d) for d in PHYSICAL)
        raise InvalidArgumentError(f"GPU backends hold {held} tensors, not {np.dtype(dtype)}") from None


class Storage:
    """A device buffer; it goes back to its runtime's pool when the last view is dropped, or is
    released then when ``reuse`` was turned off (a closed session's weights).

    The return is a ``weakref.finalize`` that holds the handle: were it ``__del__``, the cyclic
    collector freeing a reference cycle (an autograd graph) could finalize the library's buffer
    object first, and the pool would then hand out a dead buffer.
    """

    handle: Any = None  # stays None when the allocation fails

    def __init__(self, runtime: Runtime, nbytes: int) -> None:
        self.runtime = runtime
        self._reuse = [True]
        self.handle, self.size = runtime.alloc(nbytes)
        weakref.finalize(self, _give_back, runtime, self.handle, self.size, self._reuse).atexit = False

    @classmethod
    def adopt(cls, runtime: Runtime, handle: Any, nbytes: int) -> Storage:
        """Device memory allocated elsewhere (a DLPack import), counted as live while held and never
        pooled: dropping the last view drops only this reference to ``handle``."""
        storage = cls.__new__(cls)
        storage.runtime, storage._reuse = runtime, [False]
        storage.handle, storage.size = handle, runtime.adopt(nbytes)
        weakref.finalize(storage, _give_back, runtime, handle, storage.size, storage._reuse).atexit = False
        return storage

    @property
    def reuse(self) -> bool:
        return self._reuse[0]

    @reuse.setter
    def reuse(self, value: bool) -> None:
        self._reuse[0] = value


def _give_back(runtime: Runtime, handle: Any, size: int, reuse: list[bool]) -> None:
    runtime.free(handle, size, reuse[0])


@dataclass(frozen=True, eq=False)
class DeviceArray:
    """A contiguous tensor on a device; ``host`` keeps the values it was uploaded from, if any, and
    ``offset`` is where its elements start in the storage (non-zero for a :meth:`window`)."""

    storage: Storage
    shape: tuple[int, ...]
    dtype: np.dtype
    host: np.ndarray | None = None
    offset: int = 0

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def elem(self) -> Scalar:
        return PHYSICAL[self.dtype]

    @property
    def handle(self) -> Any:
        return self.storage.handle

    def view(self, shape: tuple[int, ...]) -> DeviceArray:
        """The same elements under another shape of the same size (no copy)."""
        if math.prod(shape) != self.size:
            raise InvalidArgumentError(f"cannot view {self.size} elements as shape {list(shape)}")
        host = None if self.host is None else self.host.reshape(shape)
        return DeviceArray(self.storage, tuple(shape), self.dtype, host, self.offset)

    def window(self, start: int, shape: tuple[int, ...]) -> DeviceArray:
        """The elements from ``start`` on (in storage order) as a tensor of ``shape``, sharing the
        storage: how a kernel takes a part of a tensor too large for it to bind whole."""
        if not 0 <= start <= start + math.prod(shape) <= self.size:
            raise InvalidArgumentError(
                f"a window of {list(shape)} from {start} is outside {self.size} elements"
            )
        return DeviceArray(self.storage, tuple(shape), self.dtype, None, self.offset + start)
