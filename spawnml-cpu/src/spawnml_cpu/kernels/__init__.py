"""The CPU kernel table. Each family module registers its kernels on import."""

from __future__ import annotations

from .table import KERNELS
from . import elementwise, nn, reduce, tensor  # noqa: E402,F401  (registration by import)

__all__ = ["KERNELS"]
