"""Selecting by index: ``gather``, ``scatter_add`` and their kin, one-hot masks and ``one_hot``."""

from __future__ import annotations

import numpy as np

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import constant, run
from ..function import BackwardNode, Function
from .creation import zeros
from .movement import unsqueeze
from .promotion import DEFAULT_INT, cast
from .reduce import normalize_dims
from .shape import narrow


def class_mask(index: Tensor, size: int, dim: int) -> Tensor:
    """A bool tensor of ``index``'s shape with a dimension of ``size`` inserted at ``dim``, true
    where the position along it equals ``index``."""
    shape = [1] * (index.ndim + 1)
    shape[dim] = size
    positions = constant(np.arange(size).reshape(shape), index, DEFAULT_INT)
    return run("Equal", [unsqueeze(cast(index, DEFAULT_INT), dim), positions])


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """Class indices as int64 one-hot vectors along a new last dimension (``num_classes`` wide,
    or one more than the largest index)."""
    if tensor.dtype.kind not in "iu":
        raise InvalidArgumentError("one_hot is only applicable to index tensor of type LongTensor.")
    values = tensor.numpy()
    if values.size and values.min() < 0:
        raise InvalidArgumentError("Class values must be non-negative.")
    if num_classes == -1:
        if not values.size:
            raise InvalidArgumentError("Can not infer total number of classes from empty tensor.")
        num_classes = int(values.max()) + 1
    elif values.size and values.max() >= num_classes:
        raise InvalidArgumentError("Class values must be smaller than num_classes.")
    return cast(class_mask(tensor, num_classes, tensor.ndim), DEFAULT_INT)


def _check_index(name: str, input: Tensor, dim: int, index: Tensor) -> int:
    """``dim`` made non-negative, after checking ``index`` (int64, in range) as torch does."""
    if index.dtype != DEFAULT_INT:
        raise InvalidArgumentError(f"{name}(): Expected dtype int64 for index")
    axis = normalize_dims(dim, input.ndim)[0]
    values = index.numpy()
    size = input.shape[axis] if input.ndim else 1
    if values.size and (values.min() < 0 or values.max() >= size):
        bad = values[(values < 0) | (values >= size)].flat[0]
        raise InvalidArgumentError(f"index {bad} is out of bounds for dimension {axis} with size {size}")
    return axis


class Gather(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dim: int, index: Tensor) -> Tensor:
        ctx.save_for_backward(index)
        ctx.dim, ctx.shape = dim, x.shape
        return run("GatherElements", [x, index], axis=dim)

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None]:
        (index,) = ctx.saved_tensors
        return (
            ScatterAdd.apply(zeros(ctx.shape, dtype=grad.dtype, device=grad.device), ctx.dim, index, grad),
            None,
            None,
        )


def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """``out[i][j] = input[index[i][j]][j]`` (for ``dim`` 0), ``index`` no larger than ``input``
    outside ``dim``; the gradient adds back into the gathered places."""
    axis = _check_index("gather", input, dim, index)
    return Gather.apply(input, axis, index)


class ScatterAdd(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
        ctx.save_for_backward(index)
        ctx.dim = dim
        return run("ScatterElements", [x, index, src], axis=dim, reduction="add")

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None, Tensor | None]:
        (index,) = ctx.saved_tensors
        return grad, None, None, Gather.apply(grad, ctx.dim, index) if ctx.needs_input_grad[3] else None


def _fitted(src: Tensor, index: Tensor) -> Tensor:
    """The part of ``src`` that ``index`` covers (torch reads no further)."""
    for d, n in enumerate(index.shape):
        if src.shape[d] != n:
            src = narrow(src, d, 0, n)
    return src


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """``input`` with ``src[i][j]`` added at ``[index[i][j]][j]`` (for ``dim`` 0), repeats adding up."""
    axis = _check_index("scatter_add", input, dim, index)
    return ScatterAdd.apply(input, axis, index, _fitted(src, index))
