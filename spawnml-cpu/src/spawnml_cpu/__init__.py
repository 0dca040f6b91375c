"""The CPU backend of SpawnML: numpy kernels, the default provider that runs everywhere."""

from .backend import CPUBackend

__all__ = ["CPUBackend"]
