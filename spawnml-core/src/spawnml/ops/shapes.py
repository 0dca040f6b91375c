"""Helpers for shape-inference functions: broadcasting and common output rules."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidGraphError
from ..ir import Dim, Shape
from .schema import InferenceContext, TensorType


def broadcast(*shapes: Shape) -> Shape:
    """Numpy-style multidirectional broadcast of possibly symbolic shapes."""
    if any(shape is None for shape in shapes):
        return None
    rank = max((len(shape) for shape in shapes), default=0)
    padded = [(1,) * (rank - len(shape)) + tuple(shape) for shape in shapes]
    return tuple(_broadcast_dim([shape[axis] for shape in padded]) for axis in range(rank))


def _broadcast_dim(dims: Sequence[Dim]) -> Dim:
    known = {dim for dim in dims if isinstance(dim, int) and dim != 1}
    if len(known) > 1:
        raise InvalidGraphError(f"dimensions {list(dims)} do not broadcast")
    if known:
        return known.pop()
    others = [dim for dim in dims if dim != 1]
    if not others:
        return 1
    return others[0] if all(dim == others[0] for dim in others) else None


def normalize_axis(axis: int, rank: int) -> int:
    """Map a possibly negative axis into ``[0, rank)``."""
    if not -rank <= axis < max(rank, 1):
        raise InvalidGraphError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def same_as_input(index: int = 0):
    """Infer: one output with the dtype and shape of input ``index``."""

    def infer(ctx: InferenceContext) -> list[TensorType]:
        source = ctx.input(index)
        return [source if source is not None else TensorType(None, None)]

    return infer


def broadcast_inputs(dtype_from: int | None = 0, output_dtype=None):
    """Infer: one output broadcast over all present inputs; dtype from an input or fixed."""

    def infer(ctx: InferenceContext) -> list[TensorType]:
        present = [t for t in ctx.inputs if t is not None]
        shape = broadcast(*(t.shape for t in present))
        if output_dtype is not None:
            dtype = output_dtype
        else:
            source = ctx.input(dtype_from) if dtype_from is not None else None
            dtype = source.dtype if source is not None else None
        return [TensorType(dtype, shape)]

    return infer
