"""Kernels written in the kernel language, shared by every GPU backend."""

from .elementwise import add
from .matmul import matmul
from .reduce import sum_partial

__all__ = ["add", "matmul", "sum_partial"]
