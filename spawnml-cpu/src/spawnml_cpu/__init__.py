"""The CPU backend of SpawnML: numpy kernels, the default provider that runs everywhere."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import CPUBackend

__all__ = ["CPUBackend"]


def __getattr__(name: str) -> Any:
    """``CPUBackend``, imported on first use: the plugin is found without importing the backend."""
    if name == "CPUBackend":
        from .backend import CPUBackend

        return CPUBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
