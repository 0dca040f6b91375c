"""Activation functions with torch's parameters and gradients, kinks and NaN included; the
forward passes run on the ONNX operator of the same function where there is one, and the
simplest are compositions of differentiable operations."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import run
from ..function import BackwardNode, Function
from .arith import abs, as_floating, exp, sigmoid, tanh
from .arith import relu as _relu
from .compare import logical_and, where
from .movement import reshape
from .pointwise import erf
from .promotion import as_tensor
from .shape import split
from .softmax import softmax

#: torch's SELU constants.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _maybe_in_place(fn: Callable[..., Tensor], input: Tensor, inplace: bool, *args: Any) -> Tensor:
    """``fn(input, *args)``, written into ``input`` when ``inplace`` (as its ``op_`` method)."""
    if not inplace:
        return fn(input, *args)
    from ..methods import in_place

    return in_place(fn)(input, *args)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    return _maybe_in_place(_relu, input, inplace)


class LeakyRelu(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, slope: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.slope = slope
        return run("LeakyRelu", [x], alpha=slope)

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None]:
        (x,) = ctx.saved_tensors
        return where(x > 0, grad, grad * ctx.slope), None


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``input`` where positive, else ``negative_slope * input`` (that slope at 0)."""
    return _maybe_in_place(lambda x: LeakyRelu.apply(as_floating(x), negative_slope), input, inplace)


class ExponentialUnit(Function):
    """ELU, SELU and CELU: ``scale * x`` above 0, ``scale * alpha * (exp(x / inner) - 1)`` at or
    below it (the branch torch differentiates at 0; NaN takes the linear one)."""

    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, alpha: float, scale: float, inner: float, op: str) -> Tensor:
        ctx.save_for_backward(x)
        ctx.alpha, ctx.scale, ctx.inner = alpha, scale, inner
        attrs: dict[str, dict[str, Any]] = {
            "Elu": {"alpha": alpha},
            "Selu": {"alpha": alpha, "gamma": scale},
            "Celu": {"alpha": alpha},
        }
        return run(op, [x], **attrs[op])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None, None, None]:
        (x,) = ctx.saved_tensors
        negative = grad * (ctx.scale * ctx.alpha / ctx.inner) * exp(x / ctx.inner)
        return where(x <= 0, negative, grad * ctx.scale), None, None, None, None


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    return _maybe_in_place(
        lambda x: ExponentialUnit.apply(as_floating(x), alpha, 1.0, 1.0, "Elu"), input, inplace
    )


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    def fn(x: Tensor) -> Tensor:
        return ExponentialUnit.apply(as_floating(x), SELU_ALPHA, SELU_SCALE, 1.0, "Selu")

    return _maybe_in_place(fn, input, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    return _maybe_in_place(
        lambda x: ExponentialUnit.apply(as_floating(x), alpha, 1.0, alpha, "Celu"), input, inplace
    )


class Gelu(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, approximate: str) -> Tensor:
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        return run("Gelu", [x], approximate=approximate)

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None]:
        (x,) = ctx.saved_tensors
        if ctx.approximate == "none":
            cdf = (erf(x * math.sqrt(0.5)) + 1) * 0.5
            pdf = exp(x * x * -0.5) * (1 / math.sqrt(2 * math.pi))
            return grad * (cdf + x * pdf), None
        beta, kappa = math.sqrt(2 / math.pi), 0.044715
        inner = tanh((x + x * x * x * kappa) * beta)
        slope = (inner + 1) * 0.5 + x * 0.5 * (1 - inner * inner) * beta * (x * x * (3 * kappa) + 1)
        return grad * slope, None


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``x * Φ(x)``, or its tanh approximation with ``approximate="tanh"``."""
    if approximate not in ("none", "tanh"):
        raise InvalidArgumentError(f"approximate argument must be either none or tanh, got {approximate!r}")
    return Gelu.apply(as_floating(input), approximate)


class Silu(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * run("Sigmoid", [x])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        s = sigmoid(x)
        return grad * s * (x * (1 - s) + 1)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``."""
    return _maybe_in_place(lambda x: Silu.apply(as_floating(x)), input, inplace)


class Softplus(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, beta: float, threshold: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.beta, ctx.threshold = beta, threshold
        scaled = x * beta
        return where(scaled > threshold, x, run("Softplus", [scaled]) / beta)

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None]:
        (x,) = ctx.saved_tensors
        scaled = x * ctx.beta
        return where(scaled > ctx.threshold, grad, grad * sigmoid(scaled)), None, None


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``."""
    return Softplus.apply(as_floating(input), beta, threshold)


class Hardtanh(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, low: float, high: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.low, ctx.high = low, high
        return run("Max", [run("Min", [x, as_tensor(high, x, x.dtype)]), as_tensor(low, x, x.dtype)])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None]:
        (x,) = ctx.saved_tensors
        return where(logical_and(x > ctx.low, x < ctx.high), grad, 0.0), None, None


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """``input`` clamped to ``[min_val, max_val]``; no gradient at or beyond the bounds, nor at NaN."""
    return _maybe_in_place(lambda x: Hardtanh.apply(x, min_val, max_val), input, inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    return hardtanh(input, 0.0, 6.0, inplace)


class Hardswish(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return run("HardSwish", [x])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return where(x <= -3, 0.0, where(x < 3, grad * (x / 3 + 0.5), grad))


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    return _maybe_in_place(lambda x: Hardswish.apply(as_floating(x)), input, inplace)


class Hardsigmoid(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return run("HardSigmoid", [x], alpha=1 / 6, beta=0.5)

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return where((x > -3) & (x < 3), grad / 6, 0.0)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    return _maybe_in_place(lambda x: Hardsigmoid.apply(as_floating(x)), input, inplace)


class Mish(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return run("Mish", [x])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        smooth = tanh(softplus(x))
        return grad * (smooth + x * sigmoid(x) * (1 - smooth * smooth))


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    return _maybe_in_place(lambda x: Mish.apply(as_floating(x)), input, inplace)


class LogSigmoid(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return -run("Softplus", [-x])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * sigmoid(-x)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x))``, computed without overflow."""
    return LogSigmoid.apply(as_floating(input))


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return input / (abs(input) + 1)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return input - tanh(input)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``value`` where ``input <= threshold``, else ``input`` (NaN stays)."""
    return _maybe_in_place(lambda x: where(x <= threshold, value, x), input, inplace)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """0 where ``|x| <= lambd``, else ``x``; NaN stays, with no gradient (as torch)."""
    return where(abs(input) > lambd, input, input * 0)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` moved ``lambd`` toward 0, and 0 within ``lambd`` of it."""
    return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, input * 0))


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``input`` where positive, else ``weight * input``, ``weight`` per channel (dimension 1) or shared."""
    if weight.numel() != 1:
        if input.ndim < 2 or weight.numel() != input.shape[1]:
            raise InvalidArgumentError(
                f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                f"{weight.numel()} and channel size = {input.shape[1] if input.ndim > 1 else 1}."
            )
        weight = reshape(weight, [input.shape[1]] + [1] * (input.ndim - 2))
    return where(input > 0, input, input * weight)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """``a * sigmoid(b)`` for the two halves ``a``, ``b`` of ``input`` along ``dim``."""
    size = input.shape[dim] if input.ndim else 0
    if size % 2:
        raise InvalidArgumentError(f"Halving dimension must be even, but dimension {dim} is size {size}")
    first, second = split(input, size // 2, dim)
    return first * sigmoid(second)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """``softmax(-input, dim)``."""
    return softmax(-input, dim, dtype=dtype)
