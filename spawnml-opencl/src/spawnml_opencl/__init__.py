"""The OpenCL backend of SpawnML: core's shared GPU kernels, rendered to OpenCL C and run through pyopencl."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import OpenCLBackend

__all__ = ["OpenCLBackend"]


def __getattr__(name: str) -> Any:
    """``OpenCLBackend``, imported on first use: the plugin is found without importing the backend."""
    if name == "OpenCLBackend":
        from .backend import OpenCLBackend

        return OpenCLBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
