"""The CUDA backend of SpawnML: core's shared GPU kernels, rendered to CUDA C++ and run through cupy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import CUDABackend

__all__ = ["CUDABackend"]


def __getattr__(name: str) -> Any:
    """``CUDABackend``, imported on first use: the plugin is found without importing the backend."""
    if name == "CUDABackend":
        from .backend import CUDABackend

        return CUDABackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
