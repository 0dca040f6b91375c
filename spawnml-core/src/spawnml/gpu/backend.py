"""The backend every GPU runtime shares: device tensors, the shared kernel table, launches."""

from __future__ import annotations

import math
import threading
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import numpy as np

from ..backend import Backend
from ..errors import DeviceMemoryError, InvalidArgumentError
from ..ir import Node
from ..kernel.ir import Kernel
from ..kernel.library.movement import strided_copy
from ..kernel.render import CStyleRenderer
from ..kernel.split import Parts, split_buffers
from .array import PHYSICAL, DeviceArray, Storage, physical
from .registry import GPU_KERNELS, NOT_ON_GPU
from .runtime import Runtime

#: What the 64-bit integers saturate to on the device.
_RANGE = {np.dtype(np.int64): (-(2**31), 2**31 - 1), np.dtype(np.uint64): (0, 2**32 - 1)}
#: Distinct small constants (strides, shapes) kept on the device; past it, the longest unused go.
CONSTANTS = 1024
_OPENING = threading.Lock()


@dataclass
class Traffic:
    """What was sent to a device since it was opened: kernel launches and bytes copied each way."""

    launches: int = 0
    bytes_to_device: int = 0
    bytes_from_device: int = 0


@dataclass
class OpenDevice:
    """An open device and what was prepared on it: programs by kernel, small constants by content."""

    runtime: Runtime
    programs: dict[Any, tuple[Kernel, Any]] = field(default_factory=dict)
    constants: OrderedDict[bytes, DeviceArray] = field(default_factory=OrderedDict)
    traffic: Traffic = field(default_factory=Traffic)


class GPUBackend(Backend):
    """A backend over a :class:`Runtime` and a renderer; subclasses say which, and whether available."""

    kernels = GPU_KERNELS
    element_types = frozenset(PHYSICAL)
    renderer: ClassVar[CStyleRenderer]

    @abstractmethod
    def make_runtime(self) -> Runtime:
        """Open the device (on first use, and again once it is lost)."""

    def unsupported_reason(
        self,
        node: Node,
        opset: int,
        input_dtypes: Sequence[np.dtype | None] = (),
        output_dtypes: Sequence[np.dtype | None] = (),
    ) -> str | None:
        """As the base class says; float64 also needs a device with double precision (asked only when
        a float64 tensor is involved and the backend has a device)."""
        double = np.dtype(np.float64) in (*input_dtypes, *output_dtypes)
        if double and self.availability().available and not self.runtime.float64:
            return f"{self.name} holds no double tensors: {self.runtime.describe()} has no double precision"
        reason = super().unsupported_reason(node, opset, input_dtypes, output_dtypes)
        why = NOT_ON_GPU.get((node.domain, node.op_type)) if reason == f"no {self.name} kernel" else None
        return f"{reason}: {why}" if why else reason

    @property
    def runtime(self) -> Runtime:
        return self.device().runtime

    def device(self) -> OpenDevice:
        """The open device. A lost one is replaced by a new one, so sessions created after a loss
        run while those holding tensors of the lost device report it."""
        current: OpenDevice | None = self.__dict__.get("_open")
        if current is None or current.runtime.lost:
            with _OPENING:
                current = self.__dict__.get("_open")
                if current is None or current.runtime.lost:
                    current = self.__dict__["_open"] = OpenDevice(self.make_runtime())
        return current

    def traffic(self) -> Traffic:
        """Launches and copies on the open device so far (for benchmarks: read it before and after)."""
        return self.device().traffic

    # Memory.
    def empty(self, shape: Sequence[int], dtype: np.dtype) -> DeviceArray:
        """An uninitialised tensor; :class:`DeviceMemoryError` names it when the device cannot hold it."""
        shape = tuple(int(d) for d in shape)
        nbytes = math.prod(shape) * physical(dtype).bits // 8
        runtime = self.runtime
        if nbytes > runtime.max_alloc_bytes:
            raise DeviceMemoryError(
                f"{_described(shape, dtype, nbytes)} is past the {runtime.max_alloc_bytes:,} bytes one "
                f"{self.name} buffer may hold on {runtime.describe()}"
            )
        try:
            storage = Storage(runtime, nbytes)
        except DeviceMemoryError as error:
            raise DeviceMemoryError(
                f"{_described(shape, dtype, nbytes)} could not be allocated: {error.detail}"
            ) from error
        return DeviceArray(storage, shape, np.dtype(dtype))

    def discard(self, buffer: DeviceArray) -> None:
        """Release ``buffer``'s device memory once it is dropped instead of pooling it."""
        buffer.storage.reuse = False

    def from_numpy(self, array: np.ndarray) -> DeviceArray:
        """Upload ``array``; 64-bit integers beyond the 32-bit range saturate on the device (``INT64_MAX``
        as "to the end" stays so) while the host copy, which shape-like inputs read, keeps them exactly."""
        array = np.asarray(array)
        elem = physical(array.dtype)
        out = self.empty(array.shape, array.dtype)
        if array.size:
            values = np.clip(array, *_RANGE[array.dtype]) if array.dtype in _RANGE else array
            out.storage.runtime.copy_in(out.handle, np.ascontiguousarray(values, elem.numpy))
            self._count(bytes_to_device=out.size * elem.bits // 8)
        return DeviceArray(out.storage, out.shape, out.dtype, array)

    def to_numpy(self, buffer: DeviceArray) -> np.ndarray:
        if buffer.host is not None:
            return buffer.host
        if buffer.offset:
            raise InvalidArgumentError("a window of a device tensor is read only by kernels")
        runtime = buffer.storage.runtime
        runtime.check_alive()
        nbytes = buffer.size * buffer.elem.bits // 8
        data = runtime.copy_out(buffer.handle, nbytes) if nbytes else b""
        self._count(bytes_from_device=nbytes)
        with np.errstate(invalid="ignore", over="ignore"):  # float32 past a narrower float: inf / NaN
            return np.frombuffer(data, buffer.elem.numpy).astype(buffer.dtype).reshape(buffer.shape)

    def shape_of(self, buffer: DeviceArray) -> tuple[int, ...]:
        return buffer.shape

    def dtype_of(self, buffer: DeviceArray) -> np.dtype:
        return buffer.dtype

    def assign(self, target: DeviceArray, source: DeviceArray) -> None:
        """Overwrite ``target``'s data with ``source``'s on the device (same shape and dtype)."""
        if source.storage is target.storage:
            return  # the same elements: nothing to copy (and a buffer cannot be bound twice so)
        k = strided_copy.specialize(T=target.elem, RANK=1)
        meta = self.constant([target.size, 1, 1])
        self.launch_flat(k, [source, target, meta], target.size, src_offset=0, dst_offset=0)
        object.__setattr__(target, "host", None)  # the values it was uploaded from are stale now

    def constant(self, values: Sequence[float] | np.ndarray, dtype: Any = np.uint32) -> DeviceArray:
        """Small read-only data (strides, zeros), uploaded once per distinct content (the last
        :data:`CONSTANTS` distinct ones are kept)."""
        array = np.asarray(values, dtype).reshape(-1)
        array = array if array.size else np.zeros(1, dtype)
        key = array.dtype.str.encode() + array.tobytes()
        device = self.device()
        with device.runtime.lock:
            found = device.constants.get(key)
            if found is None:
                found = device.constants[key] = self._upload_raw(array)
                if len(device.constants) > CONSTANTS:
                    device.constants.popitem(last=False)
            else:
                device.constants.move_to_end(key)
            return found

    def _upload_raw(self, array: np.ndarray) -> DeviceArray:
        storage = Storage(self.runtime, array.nbytes)
        storage.runtime.copy_in(storage.handle, array)
        self._count(bytes_to_device=array.nbytes)
        return DeviceArray(storage, array.shape, array.dtype, None)

    def _count(self, launches: int = 0, bytes_to_device: int = 0, bytes_from_device: int = 0) -> None:
        device = self.device()
        with device.runtime.lock:
            device.traffic.launches += launches
            device.traffic.bytes_to_device += bytes_to_device
            device.traffic.bytes_from_device += bytes_from_device

    # Launches.
    def launch(
        self, k: Kernel, buffers: Sequence[DeviceArray], grid: tuple[int, ...], **scalars: float | int
    ) -> None:
        """Queue ``k`` over ``grid`` workgroups; scalars by parameter name."""
        device = self.device()
        runtime = device.runtime
        parts = self._parts(k, buffers, runtime)
        key = (id(k), *parts.items()) if parts else id(k)
        entry = device.programs.get(key)
        if entry is None:
            source = self.renderer.render(split_buffers(k, parts))
            entry = device.programs[key] = (k, runtime.program(source, k.name))
        names = [p.name for p in k.scalars]
        if sorted(names) != sorted(scalars):
            raise InvalidArgumentError(f"kernel {k.name} takes scalars {names}, got {sorted(scalars)}")
        # A 0-d array indexed by () is its numpy scalar; scalar parameters have Scalar types.
        values = [
            cast(np.generic, np.array(scalars[p.name], p.type.numpy)[()])  # type: ignore[union-attr]
            for p in k.scalars
        ]
        across, down, deep = (*grid, 1, 1)[:3]
        for buffer in buffers:
            buffer.storage.runtime.check_alive()  # a tensor made before a loss
        runtime.check_alive()
        bound = [
            window
            for param, buffer in zip(k.buffers, buffers, strict=True)
            for window in self._bound(buffer, parts.get(param.name), runtime)
        ]
        runtime.launch(entry[1], bound, (across, down, deep), values)
        self._count(launches=1)

    def _parts(self, k: Kernel, buffers: Sequence[DeviceArray], runtime: Runtime) -> dict[str, Parts]:
        """How ``k`` binds each tensor past one binding: in parts of equal, aligned windows."""
        limit = runtime.max_buffer_bytes
        parts: dict[str, Parts] = {}
        for param, buffer in zip(k.buffers, buffers, strict=True):
            itemsize = buffer.elem.bits // 8
            if buffer.storage.size > limit and buffer.size * itemsize > limit:
                unit = math.lcm(runtime.window_alignment, itemsize)
                chunk = limit // unit * unit // itemsize
                parts[param.name] = (-(-buffer.size // chunk), chunk)
        bindings = len(k.buffers) + sum(count - 1 for count, _ in parts.values())
        if parts and bindings > runtime.max_bindings:
            big = ", ".join(
                _described(b.shape, b.dtype, b.size * b.elem.bits // 8)
                for p, b in zip(k.buffers, buffers, strict=True)
                if p.name in parts
            )
            raise DeviceMemoryError(
                f"kernel {k.name} would bind {big} in windows of at most {limit:,} bytes: {bindings} "
                f"bindings, past the {runtime.max_bindings} one {self.name} kernel may have on "
                f"{runtime.describe()}"
            )
        return parts

    @staticmethod
    def _bound(buffer: DeviceArray, parts: Parts | None, runtime: Runtime) -> list[Any]:
        """What a kernel binds for ``buffer``: its whole buffer, the window its elements take, or
        the windows of its ``parts``."""
        if parts is None and not buffer.offset and buffer.storage.size <= runtime.max_buffer_bytes:
            return [buffer.handle]
        itemsize = buffer.elem.bits // 8
        count, chunk = parts or (1, buffer.size)
        return [
            runtime.window(
                buffer.handle,
                (buffer.offset + j * chunk) * itemsize,
                min(chunk, buffer.size - j * chunk) * itemsize,
            )
            for j in range(count)
        ]

    def library_matmul(
        self,
        a: DeviceArray,
        b: DeviceArray,
        out: DeviceArray,
        count: int,
        m: int,
        n: int,
        k: int,
        **steps: int,
    ) -> bool:
        """Queue the batched product through the runtime's vendor library if it has one for this size
        (see :meth:`Runtime.library_matmul`, which takes whole buffers); ``False`` if not."""
        runtime = self.runtime
        runtime.check_alive()
        if any(x.offset for x in (a, b, out)) or not runtime.library_matmul(
            a.handle, b.handle, out.handle, count, m, n, k, **steps
        ):
            return False
        self._count(launches=1)
        return True

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


def _described(shape: tuple[int, ...], dtype: np.dtype, nbytes: int) -> str:
    """A tensor named in an allocation error (built only then: ``empty`` runs once per kernel)."""
    return f"a {np.dtype(dtype)} tensor of shape {list(shape)} ({nbytes:,} bytes)"
