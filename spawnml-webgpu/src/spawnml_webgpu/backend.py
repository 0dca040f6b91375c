"""The WebGPU backend: core's GPU backend over the wgpu runtime and the WGSL renderer."""

from __future__ import annotations

from functools import cached_property
from importlib.resources import files
from typing import Any

from spawnml.backend import Availability
from spawnml.gpu import GPUBackend
from spawnml.kernel.render import WGSLRenderer

from .driver_noise import filtered_stderr
from .runtime import WebGPURuntime


class WebGPUBackend(GPUBackend):
    """Runs on the first WebGPU adapter wgpu finds (high-performance preferred)."""

    name = "webgpu"
    renderer = WGSLRenderer()
    expected_failures = files(__package__) / "expected_failures.toml"

    @cached_property
    def _adapter(self) -> tuple[Any, str]:
        try:
            import wgpu
        except ImportError as error:
            return None, f"wgpu is not importable: {error}"
        try:
            with filtered_stderr():  # drivers print known harmless messages while they are probed
                adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except Exception as error:  # wgpu-native raises plain errors when no driver loads
            return None, f"wgpu found no adapter: {error}"
        if adapter is None:
            return None, "wgpu found no adapter (install a Vulkan, Metal or D3D12 driver, or Mesa's lavapipe)"
        info = adapter.info
        kind = (
            "a CPU (software) adapter"
            if info["adapter_type"] == "CPU"
            else f"a {info['adapter_type']} adapter"
        )
        return adapter, f"{info['device']} is {kind}"

    def availability(self) -> Availability:
        adapter, reason = self._adapter
        return Availability(adapter is not None, reason)

    def device_name(self) -> str:
        return self.runtime.describe()

    def make_runtime(self) -> WebGPURuntime:
        adapter, reason = self._adapter
        if adapter is None:
            from spawnml.errors import BackendUnavailableError

            raise BackendUnavailableError(f"webgpu: {reason}")
        return WebGPURuntime(adapter)
