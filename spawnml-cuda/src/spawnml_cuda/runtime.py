"""The CUDA runtime over cupy: NVRTC-compiled modules, cupy's memory pool, cuBLAS, one stream, and
CUDA graphs captured on that stream (see :mod:`.graphs`)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from typing import Any

import cupy
import numpy as np
from spawnml.errors import DeviceMemoryError

from .cublas import WORKSPACE_BYTES, Cublas, load_cublas, row_major_product
from .graphs import CapturingRuntime

#: Blocks per grid dimension: CUDA's y and z limit, and keeps every thread index within u32.
MAX_GROUPS = 65535

#: Multiply-adds (``m * n * k``) from which a product goes to cuBLAS: below, the kernel library's
#: tiled matmul is one launch as well and cuBLAS's heuristics buy nothing.
CUBLAS_MIN_WORK = 64**3


class CUDARuntime(CapturingRuntime):
    """One CUDA device and one non-blocking stream; only :meth:`copy_out` waits for the device."""

    float64 = True  # every CUDA device computes in double precision

    def __init__(self, blocks: dict[str, tuple[int, int, int]], device: int = 0) -> None:
        super().__init__()
        self.blocks = blocks
        self.device = cupy.cuda.Device(device)
        self.device.use()
        self.properties = cupy.cuda.runtime.getDeviceProperties(device)
        self.total_bytes = int(self.device.mem_info[1])  # asked once: cudaMemGetInfo is slow
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.side_stream = cupy.cuda.Stream(non_blocking=True)  # uploads while a graph is captured
        self.cublas_workspace = cupy.cuda.alloc(WORKSPACE_BYTES)
        #: The direct cuBLAS calls, or None where cuBLAS could not be bound (``cupy.matmul`` then).
        self.cublas: Cublas | None = None
        try:
            self.cublas = Cublas(load_cublas(), self.stream.ptr, self.cublas_workspace.ptr)
        except (OSError, RuntimeError) as error:
            warnings.warn(
                f"cuda: cuBLAS is not called directly ({error}); products go through cupy.matmul",
                RuntimeWarning,
                stacklevel=2,
            )

    def describe(self) -> str:
        name = self.properties["name"]
        name = name.decode() if isinstance(name, bytes) else name
        major, minor = self.properties["major"], self.properties["minor"]
        return f"CUDA device {self.device.id}: {name} (compute capability {major}.{minor})"

    @property
    def max_groups(self) -> int:
        return MAX_GROUPS

    @property
    def max_buffer_bytes(self) -> int:
        return self.total_bytes

    def _alloc(self, size: int) -> Any:
        try:
            return cupy.cuda.alloc(size)  # from cupy's default memory pool
        except cupy.cuda.memory.OutOfMemoryError as error:
            raise DeviceMemoryError(f"out of memory: {error}") from error

    def upload(self, handle: Any, data: np.ndarray) -> None:
        # From pageable memory the call returns once ``data`` is staged, so it may be freed after.
        handle.copy_from_host_async(data.ctypes.data, data.nbytes, self.stream)

    def download(self, handle: Any, nbytes: int) -> bytes:
        out = np.empty(nbytes, np.uint8)
        handle.copy_to_host_async(out.ctypes.data, nbytes, self.stream)
        self.stream.synchronize()
        return out.tobytes()

    def compile(self, source: str, name: str) -> tuple[Any, tuple[int, int, int]]:
        function = cupy.RawModule(code=source, backend="nvrtc").get_function(name)
        return function, self.blocks[source]

    def enqueue(
        self,
        program: tuple[Any, tuple[int, int, int]],
        buffers: Sequence[Any],
        grid: tuple[int, int, int],
        scalars: Sequence[np.generic],
    ) -> None:
        function, block = program
        function(grid, block, (*buffers, *scalars), stream=self.stream)

    def enqueue_matmul(
        self, a: Any, b: Any, out: Any, count: int, m: int, n: int, k: int, a_step: int, b_step: int
    ) -> bool:
        if m * n * k < CUBLAS_MIN_WORK:
            return False
        if self.cublas is not None:
            self.cublas.gemm(row_major_product(a.ptr, b.ptr, out.ptr, count, m, n, k, a_step, b_step))
            return True
        left = float32_view(a, (count if a_step else 1, m, k))
        right = float32_view(b, (count if b_step else 1, k, n))
        with self.stream:  # cupy.matmul calls cuBLAS (strided batched GEMM) on the current stream
            cupy.matmul(left, right, out=float32_view(out, (count, m, n)))
        return True

    # Graphs: cupy captures in relaxed mode, where its pool may still call cudaMalloc (global mode
    # refuses it); the buffers a capture uses stay its own (see CapturingRuntime).
    def start_capture(self) -> None:
        self.stream.synchronize()  # host data is written at once during the capture (upload_now)
        self.stream.begin_capture()

    def finish_capture(self) -> Any:
        graph = self.stream.end_capture()
        graph.upload(self.stream)  # instantiated and on the device before the first replay
        return graph

    def discard_capture(self) -> None:
        # A capture the driver already invalidated ends with an error, and leaves nothing to drop.
        with contextlib.suppress(cupy.cuda.runtime.CUDARuntimeError):
            self.stream.end_capture()

    def launch_graph(self, native: Any) -> None:
        native.launch(self.stream)

    def copy_device(self, source: Any, target: Any, nbytes: int) -> None:
        target.copy_from_device_async(source, nbytes, self.stream)

    def upload_now(self, handle: Any, data: np.ndarray) -> None:
        # On a stream of its own: the captured one may not wait, and records what it is given.
        handle.copy_from_host_async(data.ctypes.data, data.nbytes, self.side_stream)
        self.side_stream.synchronize()


def float32_view(handle: Any, shape: tuple[int, ...]) -> cupy.ndarray:
    """A cupy array over the first elements of a device buffer (no copy)."""
    return cupy.ndarray(shape, cupy.float32, memptr=handle)
