"""``softmax`` and ``log_softmax`` over one dimension, on the ONNX operators of the same name."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...tensor import Tensor
from ..dispatch import run
from ..function import BackwardNode, Function
from .arith import as_floating, exp
from .dims import normalize_dims
from .movement import reshape
from .reduce import sum


class Softmax(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dim: int) -> Tensor:
        out = run("Softmax", [x], axis=dim)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None]:
        (out,) = ctx.saved_tensors
        return out * (grad - sum(grad * out, ctx.dim, keepdim=True)), None


class LogSoftmax(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dim: int) -> Tensor:
        out = run("LogSoftmax", [x], axis=dim)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None]:
        (out,) = ctx.saved_tensors
        return grad - exp(out) * sum(grad, ctx.dim, keepdim=True), None


def _apply(function: type[Function], input: Tensor, dim: int | None, dtype: Any) -> Tensor:
    if dtype is not None:
        input = input.to(np.dtype(dtype))
    input = as_floating(input)
    if dim is None:  # torch's implicit choice for legacy calls without ``dim``
        dim = 0 if input.ndim in (0, 1, 3) else 1
    if input.ndim == 0:
        return reshape(function.apply(reshape(input, 1), 0), [])
    return function.apply(input, normalize_dims(dim, input.ndim)[0])


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``; ``dtype`` casts the input first."""
    return _apply(Softmax, input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """``x - log(sum(exp(x)))`` along ``dim``, computed stably; ``dtype`` casts the input first."""
    return _apply(LogSoftmax, input, dim, dtype)
