"""The backend every GPU runtime shares: device tensors, the shared kernel table, launches."""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from ..backend import Backend
from ..errors import InvalidArgumentError
from ..kernel.ir import Kernel
from ..kernel.library.movement import strided_copy
from ..kernel.render import CStyleRenderer
from .array import PHYSICAL, DeviceArray, Storage, physical
from .runtime import Runtime
from .table import GPU_KERNELS

_I32 = np.iinfo(np.int32)


class GPUBackend(Backend):
    """A backend over a :class:`Runtime` and a renderer; subclasses say which, and whether available."""

    kernels = GPU_KERNELS
    element_types = frozenset(PHYSICAL)
    renderer: ClassVar[CStyleRenderer]

    @abstractmethod
    def make_runtime(self) -> Runtime:
        """Open the device (called once, on first use)."""

    @cached_property
    def runtime(self) -> Runtime:
        return self.make_runtime()

    # Memory.
    def empty(self, shape: Sequence[int], dtype: np.dtype) -> DeviceArray:
        """An uninitialised tensor."""
        shape = tuple(int(d) for d in shape)
        nbytes = math.prod(shape) * physical(dtype).bits // 8
        if nbytes > self.runtime.max_buffer_bytes:
            raise InvalidArgumentError(
                f"a {dtype} tensor of shape {list(shape)} needs {nbytes:,} bytes, above the "
                f"{self.runtime.max_buffer_bytes:,} one {self.name} kernel may bind"
            )
        return DeviceArray(Storage(self.runtime, nbytes), shape, np.dtype(dtype))

    def from_numpy(self, array: np.ndarray) -> DeviceArray:
        """Upload ``array``; int64 values beyond int32 saturate on the device (``INT64_MAX`` as
        "to the end" stays so) while the host copy, which shape-like inputs read, keeps them exactly."""
        array = np.asarray(array)
        elem = physical(array.dtype)
        out = self.empty(array.shape, array.dtype)
        if array.size:
            values = np.clip(array, _I32.min, _I32.max) if array.dtype == np.int64 else array
            self.runtime.copy_in(out.handle, np.ascontiguousarray(values, elem.numpy))
        return DeviceArray(out.storage, out.shape, out.dtype, array)

    def to_numpy(self, buffer: DeviceArray) -> np.ndarray:
        if buffer.host is not None:
            return buffer.host
        nbytes = buffer.size * buffer.elem.bits // 8
        data = self.runtime.copy_out(buffer.handle, nbytes) if nbytes else b""
        return np.frombuffer(data, buffer.elem.numpy).astype(buffer.dtype).reshape(buffer.shape)

    def shape_of(self, buffer: DeviceArray) -> tuple[int, ...]:
        return buffer.shape

    def dtype_of(self, buffer: DeviceArray) -> np.dtype:
        return buffer.dtype

    def assign(self, target: DeviceArray, source: DeviceArray) -> None:
        """Overwrite ``target``'s data with ``source``'s on the device (same shape and dtype)."""
        k = strided_copy.specialize(T=target.elem, RANK=1)
        meta = self.constant([target.size, 1, 1])
        self.launch_flat(k, [source, target, meta], target.size, src_offset=0, dst_offset=0)
        object.__setattr__(target, "host", None)  # the values it was uploaded from are stale now

    @cached_property
    def _constants(self) -> dict[bytes, DeviceArray]:
        return {}

    def constant(self, values: Sequence[int] | np.ndarray, dtype: Any = np.uint32) -> DeviceArray:
        """Small read-only data (strides, zeros), uploaded once per distinct content."""
        array = np.asarray(values, dtype).reshape(-1)
        array = array if array.size else np.zeros(1, dtype)
        key = array.dtype.str.encode() + array.tobytes()
        if key not in self._constants:
            self._constants[key] = self._upload_raw(array)
        return self._constants[key]

    def _upload_raw(self, array: np.ndarray) -> DeviceArray:
        storage = Storage(self.runtime, array.nbytes)
        self.runtime.copy_in(storage.handle, array)
        return DeviceArray(storage, array.shape, np.dtype(np.int32), None)

    # Launches.
    @cached_property
    def _sources(self) -> dict[int, tuple[Kernel, Any]]:
        return {}

    def launch(
        self, k: Kernel, buffers: Sequence[DeviceArray], grid: tuple[int, ...], **scalars: float | int
    ) -> None:
        """Queue ``k`` over ``grid`` workgroups; scalars by parameter name."""
        entry = self._sources.get(id(k))
        if entry is None:
            entry = self._sources[id(k)] = (k, self.runtime.program(self.renderer.render(k), k.name))
        names = [p.name for p in k.scalars]
        if sorted(names) != sorted(scalars):
            raise InvalidArgumentError(f"kernel {k.name} takes scalars {names}, got {sorted(scalars)}")
        values = [np.array(scalars[p.name], p.type.numpy)[()] for p in k.scalars]  # type: ignore[union-attr]
        size = (*grid, 1, 1)[:3]
        self.runtime.launch(entry[1], [b.handle for b in buffers], size, values)

    def launch_flat(
        self, k: Kernel, buffers: Sequence[DeviceArray], threads: int, **scalars: float | int
    ) -> None:
        """Launch ``threads`` threads (the kernel's ``n`` or ``rows``), over a 2-D grid when large."""
        if threads == 0:
            return
        groups = -(-threads // k.workgroup[0])
        across = min(groups, self.runtime.max_groups)
        down = -(-groups // across)
        if down > self.runtime.max_groups:
            raise InvalidArgumentError(f"{threads:,} threads exceed the {self.name} grid")
        count = "n" if "n" in {p.name for p in k.scalars} else "rows"
        scalars = {count: threads, "width": across * k.workgroup[0], **scalars}
        self.launch(k, buffers, (across, down), **scalars)
