"""CPU kernels (placeholder, filled in by its family's change)."""

from __future__ import annotations

from .table import KERNELS  # noqa: F401
