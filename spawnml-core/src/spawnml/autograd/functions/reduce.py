"""Reductions: ``sum`` and ``mean`` over all elements or some dimensions."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import constant, run
from ..function import BackwardNode, Function
from .promotion import DEFAULT_INT, cast

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


class Sum(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dims: list[int], keepdim: bool) -> Tensor:
        ctx.shape, ctx.dims = x.shape, dims
        if x.dtype.kind in "bui":
            x = cast(x, DEFAULT_INT)
        if not dims:
            return x
        return run("ReduceSum", [x, constant(dims, x, DEFAULT_INT)], keepdims=int(keepdim))

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None]:
        from .movement import expand, reshape

        return expand(reshape(grad, kept_shape(ctx.shape, ctx.dims)), ctx.shape), None, None


def sum(input: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """The sum over ``dim`` (all elements by default); integers and bools sum as int64."""
    return Sum.apply(input, normalize_dims(dim, input.ndim) if input.ndim else [], keepdim)


def mean(input: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """The mean over ``dim`` (all elements by default); floating-point inputs only, as in torch."""
    if input.dtype.kind not in "fc":
        raise InvalidArgumentError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
            f"dtype. Got: {input.dtype}"
        )
    dims = normalize_dims(dim, input.ndim) if input.ndim else []
    count = 1
    for d in dims:
        count *= input.shape[d]
    return sum(input, dims, keepdim) / count if dims else sum(input, dims, keepdim) / 1
