"""The CUDA backend: core's GPU backend over the cupy runtime and the CUDA C++ renderer."""

from __future__ import annotations

from functools import cached_property
from importlib.resources import files
from typing import ClassVar

from spawnml.backend import Availability
from spawnml.errors import BackendUnavailableError
from spawnml.gpu import GPUBackend, Runtime
from spawnml.kernel.ir import Kernel
from spawnml.kernel.render import CUDARenderer


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
