"""The WebGPU backend of SpawnML: core's shared GPU kernels, rendered to WGSL and run through wgpu-py."""

from .backend import WebGPUBackend

__all__ = ["WebGPUBackend"]
