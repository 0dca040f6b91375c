"""The CUDA backend of SpawnML: core's shared GPU kernels, rendered to CUDA C++ and run through cupy."""

from .backend import CUDABackend

__all__ = ["CUDABackend"]
