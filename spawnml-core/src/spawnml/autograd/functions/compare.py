"""Comparisons and logic (bool results, no gradient) and ``where``, which passes gradients through."""

from __future__ import annotations

import numpy as np

from ...tensor import Tensor
from ..dispatch import run
from ..function import BackwardNode, Function
from .promotion import Operand, as_tensor, operands, result_type
from .reduce import sum_to


def _compare(op: str, a: Operand, b: Operand) -> Tensor:
    return run(op, list(operands(a, b)))


def eq(input: Operand, other: Operand) -> Tensor:
    return _compare("Equal", input, other)


def ne(input: Operand, other: Operand) -> Tensor:
    return logical_not(eq(input, other))


def lt(input: Operand, other: Operand) -> Tensor:
    return _compare("Less", input, other)


def le(input: Operand, other: Operand) -> Tensor:
    return _compare("LessOrEqual", input, other)


def gt(input: Operand, other: Operand) -> Tensor:
    return _compare("Greater", input, other)


def ge(input: Operand, other: Operand) -> Tensor:
    return _compare("GreaterOrEqual", input, other)


def _as_bool(x: Operand, like: Tensor) -> Tensor:
    return as_tensor(x, like, np.dtype(bool))


def logical_and(input: Tensor, other: Operand) -> Tensor:
    return run("And", [_as_bool(input, input), _as_bool(other, input)])


def logical_or(input: Tensor, other: Operand) -> Tensor:
    return run("Or", [_as_bool(input, input), _as_bool(other, input)])


def logical_not(input: Tensor) -> Tensor:
    return run("Not", [_as_bool(input, input)])


class Where(Function):
    @staticmethod
    def forward(ctx: BackwardNode, condition: Tensor, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(condition)
        ctx.shapes = a.shape, b.shape
        return run("Where", [condition, a, b])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[None, Tensor | None, Tensor | None]:
        (condition,) = ctx.saved_tensors
        zero = as_tensor(0, grad, grad.dtype)
        return (
            None,
            sum_to(where(condition, grad, zero), ctx.shapes[0]) if ctx.needs_input_grad[1] else None,
            sum_to(where(condition, zero, grad), ctx.shapes[1]) if ctx.needs_input_grad[2] else None,
        )


def where(condition: Tensor, input: Operand, other: Operand) -> Tensor:
    """``input`` where ``condition`` holds, else ``other`` (broadcast); gradients go to the side chosen."""
    like = condition
    dtype = result_type(input, other)
    a = as_tensor(input, like, dtype)
    b = as_tensor(other, like, dtype)
    return Where.apply(_as_bool(condition, like), a, b)
