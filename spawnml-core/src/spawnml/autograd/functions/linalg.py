"""Matrix products: ``matmul`` with torch's vector, matrix and batched broadcasting rules."""

from __future__ import annotations

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import run
from ..function import BackwardNode, Function
from .movement import squeeze, transpose, unsqueeze
from .promotion import as_tensor, result_type
from .reduce import sum_to


class MatMul(Function):
    @staticmethod
    def forward(ctx: BackwardNode, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return run("MatMul", [a, b])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        return (
            sum_to(MatMul.apply(grad, transpose(b, -1, -2)), a.shape) if ctx.needs_input_grad[0] else None,
            sum_to(MatMul.apply(transpose(a, -1, -2), grad), b.shape) if ctx.needs_input_grad[1] else None,
        )


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """The matrix product; 1-D operands act as a row (left) or column (right) vector, then dropped."""
    if input.ndim == 0 or other.ndim == 0:
        raise InvalidArgumentError("both arguments to matmul need to be at least 1D")
    inner = input.shape[-1], other.shape[-2] if other.ndim > 1 else other.shape[0]
    if inner[0] != inner[1]:
        raise InvalidArgumentError(
            f"mat1 and mat2 shapes cannot be multiplied ({_rows(input)}x{input.shape[-1]} and "
            f"{inner[1]}x{other.shape[-1] if other.ndim > 1 else 1})"
        )
    dtype = result_type(input, other)
    a, b = as_tensor(input, input, dtype), as_tensor(other, other, dtype)
    a = unsqueeze(a, 0) if input.ndim == 1 else a
    b = unsqueeze(b, -1) if other.ndim == 1 else b
    out = MatMul.apply(a, b)
    out = squeeze(out, -1) if other.ndim == 1 else out
    return squeeze(out, -2 if other.ndim > 1 else -1) if input.ndim == 1 else out


def _rows(x: Tensor) -> int:
    rows = 1
    for n in x.shape[:-1]:
        rows *= n
    return rows


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """The product of two matrices (2-D only)."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise InvalidArgumentError(f"mm(): expected 2-D tensors, got {input.ndim}-D and {mat2.ndim}-D")
    return matmul(input, mat2)
