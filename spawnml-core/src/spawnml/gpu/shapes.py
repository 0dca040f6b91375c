"""Shape arithmetic the GPU kernels share: element strides, broadcast strides, axes."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidArgumentError, InvalidGraphError
from ..ops.shapes import normalize_axis


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """The element strides of a C-ordered tensor of ``shape``."""
    out, step = [], 1
    for dim in reversed(shape):
        out.append(step)
        step *= dim
    return out[::-1]


def broadcast_strides(shape: Sequence[int], out: Sequence[int]) -> list[int]:
    """Strides reading ``shape`` as if broadcast to ``out`` (0 along broadcast axes)."""
    padded = [1] * (len(out) - len(shape)) + list(shape)
    return [
        0 if dim == 1 and want != 1 else s
        for dim, want, s in zip(padded, out, contiguous_strides(padded), strict=True)
    ]


def axis_index(axis: int, rank: int) -> int:
    """``axis`` (possibly negative) as an index into ``rank`` axes.

    The rule is the schema's (:func:`spawnml.ops.shapes.normalize_axis`); a kernel raises
    :class:`InvalidArgumentError` because here the axis may come from an input at run time.
    """
    try:
        return normalize_axis(axis, rank)
    except InvalidGraphError as error:
        raise InvalidArgumentError(str(error)) from None
