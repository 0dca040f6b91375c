"""Renderers from the kernel IR to GPU languages: one C-style base and a dialect per language."""

from .cstyle import CStyleRenderer
from .cuda import CUDARenderer
from .opencl import OpenCLRenderer
from .wgsl import WGSLRenderer, scalar_layout

__all__ = ["CStyleRenderer", "CUDARenderer", "OpenCLRenderer", "WGSLRenderer", "scalar_layout"]
