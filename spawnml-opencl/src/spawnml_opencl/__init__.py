"""The OpenCL backend of SpawnML: core's shared GPU kernels, rendered to OpenCL C and run through pyopencl."""

from .backend import OpenCLBackend

__all__ = ["OpenCLBackend"]
