"""Extremes: ``max``/``min`` (whole tensor, along a dimension with indices, or elementwise),
``amax``/``amin``, ``argmax``/``argmin``, ``maximum``/``minimum`` and ``clamp``, with torch's
gradients at ties: a reduction shares the gradient evenly among tied maxima, a reduction along a
dimension gives it to the index it returns, and ``maximum`` splits it in half between equal inputs.
"""

from __future__ import annotations

from typing import NamedTuple

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import constant, run, sizes
from ..function import BackwardNode, Function
from .compare import logical_and, logical_or, where
from .creation import zeros_like
from .dims import Dims, kept_shape, normalize_dims
from .indexing import class_mask
from .movement import reshape
from .promotion import DEFAULT_INT, Operand, as_tensor, cast, operands, result_type
from .reduce import sum, sum_to


class ValuesIndices(NamedTuple):
    """What ``max``/``min`` along a dimension return, as torch's ``return_types``."""

    values: Tensor
    indices: Tensor


def isnan(input: Tensor) -> Tensor:
    """Where ``input`` is NaN (nowhere for integers and bools)."""
    return run("IsNaN", [input]) if input.dtype.kind == "f" else zeros_like(input, dtype=bool)


def _check_not_empty(name: str, input: Tensor, dims: list[int] | None) -> None:
    """Refuse a reduction over no elements: of the whole tensor (``dims`` None), or along ``dims``."""
    if input.numel() == 0 and dims is None:
        raise InvalidArgumentError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
            "reduction dim with the 'dim' argument."
        )
    for d in dims or ():
        if input.shape[d] == 0:
            raise InvalidArgumentError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


class Extreme(Function):
    """``amax``/``amin`` and whole-tensor ``max``/``min``: the gradient is shared evenly among the
    elements equal to the result. As in torch, ``max()`` counts NaN as equal to a NaN result while
    ``amax`` does not (its gradient is then NaN)."""

    @staticmethod
    def forward(
        ctx: BackwardNode, x: Tensor, dims: list[int], keepdim: bool, op: str, nan_equal: bool
    ) -> Tensor:
        out = run(op, [x, sizes(dims, x)], keepdims=1)
        ctx.save_for_backward(x, out)
        ctx.dims, ctx.nan_equal = dims, nan_equal
        return out if keepdim else reshape(out, [n for i, n in enumerate(x.shape) if i not in dims])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None, None, None]:
        x, out = ctx.saved_tensors
        hit = x == out
        if ctx.nan_equal:
            hit = logical_or(hit, logical_and(isnan(x), isnan(out)))
        hits = cast(hit, grad.dtype)  # counted in floating point, as every backend sums
        share = reshape(grad, kept_shape(x.shape, ctx.dims)) / sum(hits, ctx.dims, keepdim=True)
        spread = where(hit, share, 0.0) if ctx.nan_equal else share * hits
        return spread, None, None, None, None


def _extreme(name: str, op: str, input: Tensor, dim: Dims, keepdim: bool) -> Tensor:
    dims = normalize_dims(dim, input.ndim) if input.ndim else []
    _check_not_empty(name, input, dims)
    return Extreme.apply(input, dims, keepdim, op, False)


def _whole(name: str, op: str, input: Tensor) -> Tensor:
    """``max()``/``min()`` of every element."""
    _check_not_empty(name, input, None)
    return Extreme.apply(input, list(range(input.ndim)), False, op, True)


def amax(input: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
    """The largest values over ``dim`` (every dimension by default); NaN wins."""
    return _extreme("amax", "ReduceMax", input, dim, keepdim)


def amin(input: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
    """The smallest values over ``dim`` (every dimension by default); NaN wins."""
    return _extreme("amin", "ReduceMin", input, dim, keepdim)


class ExtremeAlong(Function):
    """``max``/``min`` along one dimension: values and the index of the first extreme (or NaN)."""

    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dim: int, keepdim: bool, op: str) -> tuple[Tensor, Tensor]:
        indices = run(f"Arg{op}", [x], axis=dim, keepdims=1)
        values = run(f"Reduce{op}", [x, sizes([dim], x)], keepdims=1)
        ctx.save_for_backward(indices)
        ctx.dim, ctx.size = dim, x.shape[dim]
        if not keepdim:
            shape = [n for i, n in enumerate(x.shape) if i != dim]
            values, indices = reshape(values, shape), reshape(indices, shape)
        return values, indices

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor, _: Tensor | None) -> tuple[Tensor, None, None, None]:
        (indices,) = ctx.saved_tensors
        shape = list(indices.shape)
        chosen = class_mask(reshape(indices, [*shape[: ctx.dim], *shape[ctx.dim + 1 :]]), ctx.size, ctx.dim)
        return where(chosen, reshape(grad, shape), 0.0), None, None, None


def _along(name: str, op: str, input: Tensor, dim: int, keepdim: bool) -> ValuesIndices:
    if input.ndim == 0:
        normalize_dims(dim, 0)
        return ValuesIndices(input * 1, constant(0, input, DEFAULT_INT))
    axis = normalize_dims(dim, input.ndim)[0]
    _check_not_empty(name, input, [axis])
    return ValuesIndices(*ExtremeAlong.apply(input, axis, keepdim, op))


def max(input: Tensor, dim: int | Tensor | None = None, keepdim: bool = False) -> Tensor | ValuesIndices:
    """The largest element; with ``dim``, the largest values along it and their indices (first
    of ties); with a tensor in place of ``dim``, the elementwise ``maximum``."""
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if dim is None:
        return _whole("max", "ReduceMax", input)
    return _along("max", "Max", input, dim, keepdim)


def min(input: Tensor, dim: int | Tensor | None = None, keepdim: bool = False) -> Tensor | ValuesIndices:
    """The smallest element; with ``dim``, the smallest values along it and their indices (first
    of ties); with a tensor in place of ``dim``, the elementwise ``minimum``."""
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        return _whole("min", "ReduceMin", input)
    return _along("min", "Min", input, dim, keepdim)


def _arg(name: str, op: str, input: Tensor, dim: int | None, keepdim: bool) -> Tensor:
    if dim is None:
        _check_not_empty(name, input, None)
        flat = run(op, [reshape(input, -1)], axis=0, keepdims=0)
        return reshape(flat, [1] * input.ndim) if keepdim else flat
    if input.ndim == 0:
        normalize_dims(dim, 0)
        return constant(0, input, DEFAULT_INT)
    axis = normalize_dims(dim, input.ndim)[0]
    _check_not_empty(name, input, [axis])
    return run(op, [input], axis=axis, keepdims=int(keepdim))


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index of the largest element (of the flattened tensor without ``dim``); first of ties."""
    return _arg("argmax", "ArgMax", input, dim, keepdim)


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index of the smallest element (of the flattened tensor without ``dim``); first of ties."""
    return _arg("argmin", "ArgMin", input, dim, keepdim)


class Maximum(Function):
    @staticmethod
    def forward(ctx: BackwardNode, a: Tensor, b: Tensor, op: str) -> Tensor:
        ctx.save_for_backward(a, b)
        return run(op, [a, b])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        a, b = ctx.saved_tensors
        shared = where(a == b, grad / 2, grad)
        a_loses, b_loses = (a < b, a > b) if ctx.function is Maximum else (a > b, a < b)
        return (
            sum_to(where(a_loses, 0.0, shared), a.shape) if ctx.needs_input_grad[0] else None,
            sum_to(where(b_loses, 0.0, shared), b.shape) if ctx.needs_input_grad[1] else None,
            None,
        )


class Minimum(Maximum):
    pass


def maximum(input: Operand, other: Operand) -> Tensor:
    """The elementwise larger of the two (broadcast); NaN wins; ties share the gradient."""
    return Maximum.apply(*operands(input, other), "Max")


def minimum(input: Operand, other: Operand) -> Tensor:
    """The elementwise smaller of the two (broadcast); NaN wins; ties share the gradient."""
    return Minimum.apply(*operands(input, other), "Min")


def _inside(x: Tensor, low: Tensor | None, high: Tensor | None) -> Tensor:
    """Where ``low <= x <= high`` (bounds included; NaN is outside)."""
    if low is not None and high is not None:
        return logical_and(x >= low, x <= high)
    if low is not None:
        return x >= low
    assert high is not None, "clamp takes at least one bound"
    return x <= high


class Clamp(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, low: Tensor | None, high: Tensor | None) -> Tensor:
        ctx.save_for_backward(x, low, high)
        out = x if low is None else run("Max", [x, low])
        return out if high is None else run("Min", [out, high])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        x, low, high = ctx.saved_tensors
        grad_x = grad_low = grad_high = None
        if ctx.needs_input_grad[0]:
            grad_x = sum_to(where(_inside(x, low, high), grad, 0.0), x.shape)
        if ctx.needs_input_grad[1]:  # torch: no gradient to ``min`` where it exceeds ``max``
            below = x < low if high is None else logical_and(x < low, low < high)
            grad_low = sum_to(where(below, grad, 0.0), low.shape)
        if ctx.needs_input_grad[2]:
            above = x > high if low is None else logical_or(x > high, high < low)
            grad_high = sum_to(where(above, grad, 0.0), high.shape)
        return grad_x, grad_low, grad_high


def clamp(input: Tensor, min: Operand | None = None, max: Operand | None = None) -> Tensor:
    """``input`` limited to ``[min, max]`` (either may be omitted; tensors broadcast); where
    ``min > max`` every element is ``max``. The gradient passes where ``min <= input <= max``."""
    if min is None and max is None:
        raise InvalidArgumentError("torch.clamp: At least one of 'min' or 'max' must not be None")
    bounds = [b for b in (min, max) if b is not None]
    dtype = result_type(input, *bounds)
    x = as_tensor(input, input, dtype)
    low, high = (None if b is None else as_tensor(b, input, dtype) for b in (min, max))
    return Clamp.apply(x, low, high)


clip = clamp
