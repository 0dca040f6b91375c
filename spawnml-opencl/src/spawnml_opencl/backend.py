"""The OpenCL backend: core's GPU backend over the pyopencl runtime and the OpenCL C renderer."""

from __future__ import annotations

import os
from functools import cached_property
from importlib.resources import files
from typing import Any

from spawnml.backend import Availability
from spawnml.errors import BackendUnavailableError
from spawnml.gpu import GPUBackend, Runtime
from spawnml.kernel.render import OpenCLRenderer

#: Picks the device: its index in the platform-by-platform listing, or a substring of its name.
DEVICE_VARIABLE = "SPAWNML_OPENCL_DEVICE"


class OpenCLBackend(GPUBackend):
    """Runs on the OpenCL device ``SPAWNML_OPENCL_DEVICE`` names, else the first one found."""

    name = "opencl"
    renderer = OpenCLRenderer()
    expected_failures = files(__package__) / "expected_failures.toml"

    @cached_property
    def _device(self) -> tuple[Any, str]:
        try:
            from . import runtime
        except ImportError as error:
            return None, f"pyopencl is not importable: {error}"
        return runtime.pick(os.environ.get(DEVICE_VARIABLE))

    def availability(self) -> Availability:
        device, reason = self._device
        return Availability(device is not None, reason)

    def device_name(self) -> str:
        return self.runtime.describe()

    def make_runtime(self) -> Runtime:
        device, reason = self._device
        if device is None:
            raise BackendUnavailableError(f"opencl: {reason}")
        from .runtime import OpenCLRuntime

        return OpenCLRuntime(device)
