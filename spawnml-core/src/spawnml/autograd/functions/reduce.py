"""Reductions, ``sum`` and ``mean`` over all elements or some dimensions, and broadcasting
(``expand``), together because a sum's gradient is an expansion and an expansion's a sum."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import run, sizes
from ..function import BackwardNode, Function
from .dims import Dims, kept_shape, normalize_dims
from .movement import reshape, shape_arg
from .promotion import DEFAULT_INT, cast


class Expand(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, shape: list[int]) -> Tensor:
        ctx.shape = x.shape
        return run("Expand", [x, sizes(shape, x)])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None]:
        return sum_to(grad, ctx.shape), None


def expand(input: Tensor, *sizes: Any) -> Tensor:
    """``input`` broadcast to ``sizes`` (``-1`` keeps a dimension)."""
    want = shape_arg(sizes)
    lead = len(want) - input.ndim
    if lead < 0:
        raise InvalidArgumentError(
            f"the number of sizes provided ({len(want)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({input.ndim})"
        )
    shape = [input.shape[i - lead] if n == -1 and i >= lead else n for i, n in enumerate(want)]
    for i, n in enumerate(input.shape):
        if n != 1 and n != shape[lead + i]:
            raise InvalidArgumentError(
                f"The expanded size of the tensor ({shape[lead + i]}) must match the existing size ({n}) "
                f"at non-singleton dimension {lead + i}.  Target sizes: {want}.  "
                f"Tensor sizes: {list(input.shape)}"
            )
    return input if list(input.shape) == shape else Expand.apply(input, shape)


class Sum(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dims: list[int], keepdim: bool) -> Tensor:
        ctx.shape, ctx.dims = x.shape, dims
        if x.dtype.kind in "bui":
            x = cast(x, DEFAULT_INT)
        if not dims:
            return x
        return run("ReduceSum", [x, sizes(dims, x)], keepdims=int(keepdim))

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None]:
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


def sum_to(grad: Tensor, shape: Sequence[int]) -> Tensor:
    """``grad`` summed over the dimensions that broadcasting added or stretched, to ``shape``."""
    shape = tuple(shape)
    if tuple(grad.shape) == shape:
        return grad
    lead = grad.ndim - len(shape)
    dims = list(range(lead)) + [lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1]
    return reshape(sum(grad, dims, keepdim=True), list(shape)) if dims else reshape(grad, list(shape))
