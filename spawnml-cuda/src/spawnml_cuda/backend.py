"""The CUDA backend: core's GPU backend over the cupy runtime and the CUDA C++ renderer."""

from __future__ import annotations

from functools import cached_property
from importlib.resources import files
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
from spawnml.backend import Availability
from spawnml.errors import BackendUnavailableError, InvalidArgumentError
from spawnml.gpu import GPUBackend, Runtime
from spawnml.gpu.array import DeviceArray, Storage, physical
from spawnml.kernel.ir import Kernel
from spawnml.kernel.render import CUDARenderer

if TYPE_CHECKING:  # the runtime imports cupy, which only a device needs
    from .runtime import CUDARuntime


class BlockRecordingRenderer(CUDARenderer):
    """CUDA C++ that remembers each rendered source's block shape, which the source itself
    does not carry (``__launch_bounds__`` holds only the thread count)."""

    def __init__(self) -> None:
        self.blocks: dict[str, tuple[int, int, int]] = {}

    def render(self, k: Kernel) -> str:
        source = super().render(k)
        self.blocks[source] = (*k.workgroup, 1, 1)[:3]
        return source


class CUDABackend(GPUBackend):
    """Runs on CUDA device 0 through cupy; unavailable, saying why, without cupy or a device."""

    name = "cuda"
    renderer: ClassVar[BlockRecordingRenderer] = BlockRecordingRenderer()
    expected_failures = files(__package__) / "expected_failures.toml"

    @cached_property
    def _unavailable(self) -> str | None:
        try:
            import cupy
        except ImportError as error:
            return f"cupy is not importable: {error}"
        try:
            if not cupy.is_available():
                return "cupy finds no usable CUDA device (cupy.is_available() is false)"
        except Exception as error:  # a broken CUDA install raises from the driver
            return f"cupy cannot reach a CUDA device: {error}"
        return None

    def availability(self) -> Availability:
        reason = self._unavailable
        return Availability(reason is None, reason or "cupy finds a CUDA device")

    def device_name(self) -> str:
        return self.runtime.describe()

    def make_runtime(self) -> Runtime:
        if self._unavailable is not None:
            raise BackendUnavailableError(f"cuda: {self._unavailable}")
        from .runtime import CUDARuntime

        return CUDARuntime(self.renderer.blocks)

    # DLPack: device memory is shared with torch, cupy and other CUDA libraries without a copy.
    def from_dlpack(self, obj: Any) -> DeviceArray:
        """Adopt a CUDA array of this device without a copy when its type is held as is (float32,
        int32); other integer types are converted on the device, and host arrays are uploaded."""
        import cupy

        kind, device_id = obj.__dlpack_device__()
        if kind == DLPACK_CPU:
            return self.from_numpy(np.from_dlpack(obj))
        runtime = cast("CUDARuntime", self.runtime)  # this backend's runtimes are all CUDA ones
        if kind != DLPACK_CUDA or device_id != runtime.device.id:
            raise InvalidArgumentError(
                f"cuda: DLPack device type {kind} number {device_id} is not {runtime.describe()}"
            )
        with runtime.stream:  # the producer's pending work is ordered before this stream's
            array = cupy.from_dlpack(obj)
        dtype = np.dtype(array.dtype)
        held = physical(dtype).numpy
        if dtype != held:
            array = array.clip(np.iinfo(held).min, np.iinfo(held).max) if dtype == np.int64 else array
            with runtime.stream:
                array = array.astype(held)
        array = cupy.ascontiguousarray(array)
        storage = Storage.adopt(runtime, array.data, array.nbytes)
        return DeviceArray(storage, tuple(array.shape), dtype)

    def dlpack_source(self, buffer: DeviceArray) -> Any:
        """A cupy array over ``buffer``'s memory, after the work queued on it (no copy for float32
        and int32; other integer types are converted on the device). The buffer is then never
        pooled again, so the memory stays the export's for as long as the consumer holds it."""
        import cupy

        runtime = cast("CUDARuntime", buffer.storage.runtime)  # a buffer of this backend
        runtime.check_alive()
        runtime.stream.synchronize()
        buffer.storage.reuse = False
        array = cupy.ndarray(buffer.shape, buffer.elem.numpy, memptr=buffer.handle)
        return array if array.dtype == buffer.dtype else array.astype(buffer.dtype)


#: DLPack device types (``DLDeviceType``): host memory and CUDA device memory.
DLPACK_CPU, DLPACK_CUDA = 1, 2
