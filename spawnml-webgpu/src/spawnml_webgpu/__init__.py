"""The WebGPU backend of SpawnML: core's shared GPU kernels, rendered to WGSL and run through wgpu-py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import WebGPUBackend

__all__ = ["WebGPUBackend"]


def __getattr__(name: str) -> Any:
    """``WebGPUBackend``, imported on first use: the plugin is found without importing the backend."""
    if name == "WebGPUBackend":
        from .backend import WebGPUBackend

        return WebGPUBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
