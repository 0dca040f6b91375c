"""Dimension arguments as torch takes them: one axis, several, or None for all."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import InvalidArgumentError

Dims = int | Sequence[int] | None


def normalize_dims(dim: Dims, rank: int) -> list[int]:
    """``dim`` as sorted non-negative axes (every axis for None), checked against ``rank``."""
    if dim is None:
        return list(range(rank))
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return list(range(rank))
    span = max(rank, 1)
    for d in dims:
        if not -span <= d < span:
            raise InvalidArgumentError(
                f"Dimension out of range (expected to be in range of [{-span}, {span - 1}], but got {d})"
            )
    return sorted({d % span for d in dims})


def kept_shape(shape: Sequence[int], dims: Sequence[int]) -> list[int]:
    """``shape`` with the reduced ``dims`` kept as size 1."""
    return [1 if i in dims else n for i, n in enumerate(shape)]
