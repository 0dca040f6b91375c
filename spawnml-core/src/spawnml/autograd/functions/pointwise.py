"""More elementwise math: trigonometry, ``erf``, ``reciprocal``/``rsqrt``, accurate ``log1p`` and
``expm1``, ``square``, and the piecewise-constant functions (``floor``, ``ceil``, ``round``,
``trunc``, ``sign``) whose gradient is zero, as in torch."""

from __future__ import annotations

import math

from ...tensor import Tensor
from ..dispatch import run
from ..function import BackwardNode, Function
from .arith import as_floating, exp, log
from .compare import where
from .creation import zeros_like


class Sin(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return run("Sin", [x])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * cos(x)


class Cos(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return run("Cos", [x])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return -grad * sin(x)


class Erf(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return run("Erf", [x])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * (2 / math.sqrt(math.pi)) * exp(-(x * x))


class Reciprocal(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        out = run("Reciprocal", [x])
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return -grad * out * out


class Rsqrt(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        out = run("Reciprocal", [run("Sqrt", [x])])
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad * out * out * out * -0.5


class Log1p(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        # log(u) * x / (u - 1) with u = 1 + x cancels u's rounding error (Goldberg, 1991).
        u = x + 1
        return where(u == 1, x, where(u == math.inf, u, log(u) * (x / (u - 1))))

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad / (x + 1)


class Expm1(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        # (u - 1) * x / log(u) with u = exp(x) cancels u's rounding error (Kahan).
        u = exp(x)
        out = where(u == 1, x, where((u == math.inf) | (u - 1 == -1), u - 1, (u - 1) * (x / log(u))))
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad * (out + 1)


def sin(input: Tensor) -> Tensor:
    return Sin.apply(as_floating(input))


def cos(input: Tensor) -> Tensor:
    return Cos.apply(as_floating(input))


def erf(input: Tensor) -> Tensor:
    return Erf.apply(as_floating(input))


def reciprocal(input: Tensor) -> Tensor:
    return Reciprocal.apply(as_floating(input))


def rsqrt(input: Tensor) -> Tensor:
    """``1 / sqrt(input)``."""
    return Rsqrt.apply(as_floating(input))


def log1p(input: Tensor) -> Tensor:
    """``log(1 + input)``, accurate for small ``input``."""
    return Log1p.apply(as_floating(input))


def expm1(input: Tensor) -> Tensor:
    """``exp(input) - 1``, accurate for small ``input``."""
    return Expm1.apply(as_floating(input))


def square(input: Tensor) -> Tensor:
    return input * input


class Stepwise(Function):
    """A piecewise-constant function: its gradient is zero everywhere (torch's convention)."""

    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, op: str) -> Tensor:
        if op == "Trunc":
            return where(x < 0, run("Ceil", [x]), run("Floor", [x]))
        if op == "Sign":  # torch: the sign of NaN is 0
            return where(run("IsNaN", [x]), 0.0, run("Sign", [x]))
        return run(op, [x])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None]:
        return zeros_like(grad), None


def _stepwise(op: str, input: Tensor) -> Tensor:
    return input * 1 if input.dtype.kind in "biu" else Stepwise.apply(input, op)


def floor(input: Tensor) -> Tensor:
    return _stepwise("Floor", input)


def ceil(input: Tensor) -> Tensor:
    return _stepwise("Ceil", input)


def trunc(input: Tensor) -> Tensor:
    """``input`` rounded toward zero."""
    return _stepwise("Trunc", input)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """``input`` rounded to ``decimals`` places, halves to even."""
    if decimals == 0:
        return _stepwise("Round", input)
    scale = 10.0**decimals
    return _stepwise("Round", input * scale) / scale


def sign(input: Tensor) -> Tensor:
    """-1, 0 or 1 by the sign of ``input`` (0 for NaN)."""
    return Stepwise.apply(input, "Sign") if input.dtype.kind == "f" else run("Sign", [input])
