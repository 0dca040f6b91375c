"""Statistics over dimensions: ``var``, ``std`` and ``logsumexp``, with torch's corrections and
gradients (``std`` gives none where it is 0; ``logsumexp`` is stable for large and infinite inputs)."""

from __future__ import annotations

import math

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..function import BackwardNode, Function
from .arith import abs, exp, log, sqrt
from .compare import where
from .extrema import amax
from .movement import reshape
from .reduce import Dims, kept_shape, mean, normalize_dims, sum


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
