"""Operator schemas (placeholder, filled in by its family's change)."""

from __future__ import annotations

from ..schema import OpSchema

SCHEMAS: list[OpSchema] = []
