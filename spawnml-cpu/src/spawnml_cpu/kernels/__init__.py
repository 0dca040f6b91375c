"""The CPU kernel table. Each family module registers its kernels on import."""

from __future__ import annotations

from . import elementwise, nn, reduce, tensor  # noqa: F401  (registration by import)
from .table import KERNELS

__all__ = ["KERNELS"]
