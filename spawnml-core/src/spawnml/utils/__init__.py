"""Utilities with torch.utils' names: :mod:`.data` (datasets and the data loader)."""

from __future__ import annotations

from . import data

__all__ = ["data"]
