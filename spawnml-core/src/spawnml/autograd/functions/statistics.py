"""Statistics over dimensions: ``var``, ``std``, ``logsumexp`` and vector ``norm``, with torch's
corrections and gradients (``std`` and ``norm`` give none where they are 0; ``logsumexp`` is
stable for large and infinite inputs)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..function import BackwardNode, Function
from .arith import abs, exp, log, sqrt
from .compare import where
from .creation import zeros_like
from .dims import Dims, kept_shape, normalize_dims
from .extrema import amax, amin
from .movement import reshape
from .pointwise import sign
from .promotion import cast
from .reduce import mean, sum


def _correction(dim: Dims | bool, unbiased: bool | None, correction: float | None) -> tuple[Dims, float]:
    """``dim`` and the correction, from torch's spellings: ``var(x, unbiased)``, ``var(x, dim,
    unbiased)`` or ``var(x, dim, correction=c)`` (1 by default)."""
    if isinstance(dim, bool):  # var(input, unbiased)
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise InvalidArgumentError("var/std: give either unbiased or correction, not both")
    return dim, float(correction if correction is not None else 1 if unbiased is None else int(unbiased))


def var(
    input: Tensor,
    dim: Dims | bool = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> Tensor:
    """The variance over ``dim`` (every dimension by default), dividing by ``n - correction``."""
    dim, correction = _correction(dim, unbiased, correction)
    dims = normalize_dims(dim, input.ndim) if input.ndim else []
    count = math.prod(input.shape[d] for d in dims)
    centered = input - mean(input, dims, keepdim=True)
    return sum(centered * centered, dims, keepdim) / max(count - correction, 0)


class _RootOfVariance(Function):
    @staticmethod
    def forward(ctx: BackwardNode, variance: Tensor) -> Tensor:
        out = sqrt(variance)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return where(out == 0, 0.0, grad / (out * 2))


def std(
    input: Tensor,
    dim: Dims | bool = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> Tensor:
    """The standard deviation over ``dim``; its gradient is 0 where it is 0, as torch's."""
    return _RootOfVariance.apply(var(input, dim, unbiased, keepdim, correction=correction))


class LogSumExp(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dims: list[int], keepdim: bool) -> Tensor:
        shift = amax(x, dims, keepdim=True)
        shift = where(abs(shift) == math.inf, 0.0, shift)
        out = log(sum(exp(x - shift), dims, keepdim=True)) + shift
        ctx.save_for_backward(x, out)
        ctx.dims = dims
        return out if keepdim else reshape(out, [n for i, n in enumerate(x.shape) if i not in dims])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None]:
        x, out = ctx.saved_tensors
        return reshape(grad, kept_shape(x.shape, ctx.dims)) * exp(x - out), None, None


def logsumexp(input: Tensor, dim: Dims, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(input)))`` over ``dim``, computed without overflow."""
    dims = normalize_dims(dim, input.ndim) if input.ndim else []
    return LogSumExp.apply(input, dims, keepdim)


class VectorNorm(Function):
    """The ``p``-norm (finite ``p >= 0``; 0 counts non-zeros) over ``dims``; the gradient is 0
    where the norm is 0, and everywhere for ``p = 0``."""

    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, p: float, dims: list[int], keepdim: bool) -> Tensor:
        if p == 0:
            out = sum(cast(x != 0, x.dtype), dims, keepdim=True)
        else:
            magnitude = abs(x)
            powered = magnitude * magnitude if p == 2 else magnitude**p
            out = sum(powered, dims, keepdim=True)
            out = sqrt(out) if p == 2 else out ** (1 / p)
        ctx.save_for_backward(x, out)
        ctx.p, ctx.dims = p, dims
        return out if keepdim else reshape(out, [n for i, n in enumerate(x.shape) if i not in dims])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None, None]:
        x, out = ctx.saved_tensors
        if ctx.p == 0:
            return zeros_like(x), None, None, None
        grad = reshape(grad, kept_shape(x.shape, ctx.dims))
        if ctx.p == 2:
            scaled = x * (grad / out)
        else:
            scaled = sign(x) * abs(x) ** (ctx.p - 1) * (grad / out ** (ctx.p - 1))
        return where(out == 0, 0.0, scaled), None, None, None


def norm(
    input: Tensor, p: float | str | None = "fro", dim: Dims = None, keepdim: bool = False, dtype: Any = None
) -> Tensor:
    """The vector ``p``-norm over ``dim`` (every element by default): "fro" and None are 2,
    ``inf``/``-inf`` the largest/smallest magnitude, 0 the count of non-zeros."""
    if dtype is not None:
        input = input.to(np.dtype(dtype))
    order = 2.0 if p in ("fro", None) else p
    if isinstance(order, str):
        raise InvalidArgumentError(f"norm(): p={order!r} is not supported; give a number, 'fro' or None")
    dims = normalize_dims(dim, input.ndim) if input.ndim else []
    if order == math.inf:
        return amax(abs(input), dims, keepdim)
    if order == -math.inf:
        return amin(abs(input), dims, keepdim)
    if order < 0:
        raise InvalidArgumentError(f"norm(): p={order} is not supported; give p > 0, 0 or ±inf")
    return VectorNorm.apply(input, float(order), dims, keepdim)
