"""Elementwise arithmetic with broadcasting, and the basic unary functions and activations."""

from __future__ import annotations

from ...tensor import Tensor
from ..dispatch import run
from ..function import BackwardNode, Function
from .compare import where
from .promotion import DEFAULT_FLOAT, Operand, cast, operands
from .reduce import sum_to


class Add(Function):
    @staticmethod
    def forward(ctx: BackwardNode, a: Tensor, b: Tensor) -> Tensor:
        ctx.shapes = a.shape, b.shape
        return run("Add", [a, b])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, Tensor]:
        return sum_to(grad, ctx.shapes[0]), sum_to(grad, ctx.shapes[1])


class Sub(Function):
    @staticmethod
    def forward(ctx: BackwardNode, a: Tensor, b: Tensor) -> Tensor:
        ctx.shapes = a.shape, b.shape
        return run("Sub", [a, b])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, Tensor]:
        return sum_to(grad, ctx.shapes[0]), sum_to(neg(grad), ctx.shapes[1])


class Mul(Function):
    @staticmethod
    def forward(ctx: BackwardNode, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return run("Mul", [a, b])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        return (
            sum_to(grad * b, a.shape) if ctx.needs_input_grad[0] else None,
            sum_to(grad * a, b.shape) if ctx.needs_input_grad[1] else None,
        )


class Div(Function):
    @staticmethod
    def forward(ctx: BackwardNode, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return run("Div", [a, b])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        return (
            sum_to(grad / b, a.shape) if ctx.needs_input_grad[0] else None,
            sum_to(-grad * a / (b * b), b.shape) if ctx.needs_input_grad[1] else None,
        )


class Pow(Function):
    @staticmethod
    def forward(ctx: BackwardNode, a: Tensor, b: Tensor) -> Tensor:
        out = run("Pow", [a, b])
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b, out = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            # torch: d/da a**b = b * a**(b-1), taken as 0 where b == 0 (also at a == 0).
            grad_a = sum_to(where(b == 0, 0.0, grad * b * a ** (b - 1)), a.shape)
        if ctx.needs_input_grad[1]:
            # torch: d/db a**b = a**b * log(a), taken as 0 where a == 0 and b >= 0.
            grad_b = sum_to(where((a == 0) & (b >= 0), 0.0, grad * out * log(a)), b.shape)
        return grad_a, grad_b


def add(input: Operand, other: Operand, *, alpha: float = 1) -> Tensor:
    """``input + alpha * other``, broadcasting."""
    if alpha != 1:
        other = mul(other, alpha)
    return Add.apply(*operands(input, other))


def sub(input: Operand, other: Operand, *, alpha: float = 1) -> Tensor:
    """``input - alpha * other``, broadcasting."""
    if alpha != 1:
        other = mul(other, alpha)
    return Sub.apply(*operands(input, other))


def mul(input: Operand, other: Operand) -> Tensor:
    return Mul.apply(*operands(input, other))


def div(input: Operand, other: Operand) -> Tensor:
    """True division: integers divide to floats, as in torch."""
    return Div.apply(*operands(input, other, float_result=True))


def pow(input: Operand, exponent: Operand) -> Tensor:
    return Pow.apply(*operands(input, exponent))


class Neg(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        return run("Neg", [x])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        return neg(grad)


def neg(input: Tensor) -> Tensor:
    return Neg.apply(input)


class Exp(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        out = run("Exp", [x])
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad * out


class Log(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return run("Log", [x])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad / x


class Sqrt(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        out = run("Sqrt", [x])
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad / (out * 2)


class Abs(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return run("Abs", [x])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        # torch: the gradient of |x| is 0 at 0 and at NaN.
        return where(x > 0, grad, where(x < 0, -grad, 0.0))


class Relu(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        out = run("Relu", [x])
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return where(out <= 0, 0.0, grad)  # torch: 0 at 0; NaN inputs pass the gradient through


class Sigmoid(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        out = run("Sigmoid", [x])
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad * out * (1 - out)


class Tanh(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor) -> Tensor:
        out = run("Tanh", [x])
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad * (1 - out * out)


def as_floating(x: Tensor) -> Tensor:
    """Integer and bool inputs of floating-point functions become float32, as in torch."""
    return x if x.dtype.kind in "fc" else cast(x, DEFAULT_FLOAT)


def exp(input: Tensor) -> Tensor:
    return Exp.apply(as_floating(input))


def log(input: Tensor) -> Tensor:
    return Log.apply(as_floating(input))


def sqrt(input: Tensor) -> Tensor:
    return Sqrt.apply(as_floating(input))


def abs(input: Tensor) -> Tensor:
    return Abs.apply(input)


def relu(input: Tensor) -> Tensor:
    return Relu.apply(input)


def sigmoid(input: Tensor) -> Tensor:
    return Sigmoid.apply(as_floating(input))


def tanh(input: Tensor) -> Tensor:
    return Tanh.apply(as_floating(input))
