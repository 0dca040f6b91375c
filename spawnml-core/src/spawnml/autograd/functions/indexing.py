"""Selecting by index: ``Tensor[key]`` and item assignment, ``gather``/``scatter`` and their
kin, ``embedding``, ``masked_fill``, one-hot masks and ``one_hot``; and ``cumsum``, whose
gradient is a reversed ``cumsum``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import check, constant, run, sizes
from ..function import BackwardNode, Function
from .compare import where
from .creation import full, zeros
from .dims import normalize_dims
from .movement import reshape, to, unsqueeze
from .promotion import DEFAULT_INT, as_tensor, cast
from .reduce import expand
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
    check(_check_in_bounds, index, axis, input.shape[axis] if input.ndim else 1)
    return axis


def _check_in_bounds(index: Tensor, axis: int, size: int) -> None:
    values = index.numpy()
    if values.size and (values.min() < 0 or values.max() >= size):
        bad = values[(values < 0) | (values >= size)].flat[0]
        raise InvalidArgumentError(f"index {bad} is out of bounds for dimension {axis} with size {size}")


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


class Scatter(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
        ctx.save_for_backward(index)
        ctx.dim = dim
        return run("ScatterElements", [x, index, src], axis=dim)

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor | None, None, None, Tensor | None]:
        (index,) = ctx.saved_tensors
        cleared = None
        if ctx.needs_input_grad[0]:
            cleared = Scatter.apply(
                grad, ctx.dim, index, zeros(index.shape, dtype=grad.dtype, device=grad.device)
            )
        taken = Gather.apply(grad, ctx.dim, index) if ctx.needs_input_grad[3] else None
        return cleared, None, None, taken


def scatter(
    input: Tensor,
    dim: int,
    index: Tensor,
    src: Tensor | float | None = None,
    *,
    value: float | None = None,
    reduce: str | None = None,
) -> Tensor:
    """``input`` with ``src[i][j]`` (or ``value``) written at ``[index[i][j]][j]`` (for ``dim`` 0);
    ``reduce="add"`` adds instead. Where ``index`` repeats a place, which write wins is unspecified."""
    src = value if src is None else src
    if src is None:
        raise InvalidArgumentError("scatter() expects either src or value")
    axis = _check_index("scatter", input, dim, index)
    source = (
        _fitted(src, index)
        if isinstance(src, Tensor)
        else full(index.shape, src, dtype=input.dtype, device=input.device)
    )
    if reduce == "add":
        return ScatterAdd.apply(input, axis, index, source)
    if reduce is not None:
        raise InvalidArgumentError(f"scatter(): reduce={reduce!r} is not supported; use scatter_reduce")
    return Scatter.apply(input, axis, index, as_tensor(source, input, input.dtype))


def _along(index: Tensor, dim: int, shape: Sequence[int]) -> Tensor:
    """A 1-D ``index`` placed along ``dim`` and broadcast to ``shape``."""
    view = [1] * len(shape)
    view[dim] = index.numel()
    return expand(reshape(index, view), list(shape))


class IndexSelect(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dim: int, index: Tensor) -> Tensor:
        ctx.save_for_backward(index)
        ctx.dim, ctx.shape = dim, x.shape
        return run("Gather", [x, index], axis=dim)

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None]:
        (index,) = ctx.saved_tensors
        base = zeros(ctx.shape, dtype=grad.dtype, device=grad.device)
        return ScatterAdd.apply(base, ctx.dim, _along(index, ctx.dim, grad.shape), grad), None, None


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The slices of ``input`` at the positions ``index`` (1-D) along ``dim``."""
    if index.ndim > 1:
        raise InvalidArgumentError("index_select(): Index is supposed to be a vector")
    axis = _check_index("index_select", input, dim, index) if input.ndim else 0
    if input.ndim == 0:
        return IndexSelect.apply(reshape(input, 1), 0, reshape(index, -1))
    return IndexSelect.apply(input, axis, reshape(index, -1))


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: float = 1) -> Tensor:
    """``input`` with the slices of ``alpha * source`` added at the positions ``index`` along ``dim``."""
    axis = _check_index("index_add", input, dim, index)
    source = source if alpha == 1 else source * alpha
    return ScatterAdd.apply(input, axis, _along(reshape(index, -1), axis, source.shape), source)


def masked_fill(input: Tensor, mask: Tensor, value: Tensor | float) -> Tensor:
    """``input`` with ``value`` where ``mask`` (bool, broadcast) holds; no gradient flows there."""
    if mask.dtype != np.dtype(bool):
        raise InvalidArgumentError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype}"
        )
    if isinstance(value, Tensor) and value.ndim:
        raise InvalidArgumentError(
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
            f"{value.ndim} dimension(s)."
        )
    return where(mask, as_tensor(value, input, input.dtype), input)


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """The rows of ``weight`` at the indices ``input``; the row ``padding_idx`` gets no gradient."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise InvalidArgumentError("embedding: max_norm, scale_grad_by_freq and sparse are not supported")
    rows = reshape(index_select(weight, 0, reshape(input, -1)), [*input.shape, weight.shape[1]])
    if padding_idx is None:
        return rows
    padding = padding_idx + weight.shape[0] if padding_idx < 0 else padding_idx
    return where(unsqueeze(input == padding, -1), rows.detach(), rows)


class CumSum(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dim: int, reverse: bool) -> Tensor:
        ctx.dim, ctx.reverse = dim, reverse
        return run("CumSum", [x, sizes(dim, x)], reverse=int(reverse))

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None]:
        return CumSum.apply(grad, ctx.dim, not ctx.reverse), None, None


def cumsum(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Running sums along ``dim``; integers and bools sum as int64 unless ``dtype`` says otherwise."""
    if dtype is not None:
        input = input.to(np.dtype(dtype))
    elif input.dtype.kind in "bui":
        input = cast(input, DEFAULT_INT)
    if input.ndim == 0:
        normalize_dims(dim, 0)
        return input * 1
    return CumSum.apply(input, normalize_dims(dim, input.ndim)[0], False)


def _positions(input: Tensor, key: Any) -> np.ndarray:
    """Where the elements ``input[key]`` lie in the flattened ``input`` (numpy's indexing rules,
    which are torch's); index tensors are read to the host."""
    parts = key if isinstance(key, tuple) else (key,)
    host = []
    for part in parts:
        if isinstance(part, slice) and part.step is not None and part.step <= 0:
            raise InvalidArgumentError("step must be greater than zero")
        if isinstance(part, Tensor):
            if part.dtype.kind not in "biu":
                raise InvalidArgumentError("tensors used as indices must be long, int, byte or bool tensors")
            part = part.numpy()
        host.append(part)
    try:
        return np.arange(input.numel(), dtype=np.int64).reshape(input.shape)[tuple(host)]
    except IndexError as error:
        raise InvalidArgumentError(str(error)) from None


class Take(Function):
    """The elements at flat ``positions``, in their shape; the gradient adds back into place."""

    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, positions: Tensor) -> Tensor:
        ctx.save_for_backward(positions)
        ctx.shape = x.shape
        return run("Gather", [reshape(x, -1), positions], axis=0)

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None]:
        (positions,) = ctx.saved_tensors
        base = zeros(math.prod(ctx.shape), dtype=grad.dtype, device=grad.device)
        spread = ScatterAdd.apply(base, 0, reshape(positions, -1), reshape(grad, -1))
        return reshape(spread, list(ctx.shape)), None


class Put(Function):
    """``x`` with ``values`` written at flat ``positions`` (shaped alike)."""

    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, positions: Tensor, values: Tensor) -> Tensor:
        ctx.save_for_backward(positions)
        flat = reshape(positions, -1)
        written = run("ScatterElements", [reshape(x, -1), flat, reshape(values, -1)], axis=0)
        return reshape(written, list(x.shape))

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor | None, None, Tensor | None]:
        (positions,) = ctx.saved_tensors
        cleared = None
        if ctx.needs_input_grad[0]:
            cleared = Put.apply(grad, positions, zeros(positions.shape, dtype=grad.dtype, device=grad.device))
        return cleared, None, Take.apply(grad, positions) if ctx.needs_input_grad[2] else None


def take(input: Tensor, positions: np.ndarray) -> Tensor:
    """The elements of ``input`` at flat ``positions`` (an int64 host array), in its shape."""
    return Take.apply(input, constant(positions, input, DEFAULT_INT))


def _sliced(input: Tensor, key: Any) -> Tensor | None:
    """``input[key]`` as slices and reshapes (backward: padding) when ``key`` holds only ints in
    range, unit-step slices, None and one Ellipsis; None for any other key."""
    parts = key if isinstance(key, tuple) else (key,)
    basic = all(p is None or p is Ellipsis or isinstance(p, slice) or type(p) is int for p in parts)
    consumed = sum(p is not None and p is not Ellipsis for p in parts)
    if not basic or sum(p is Ellipsis for p in parts) > 1 or consumed > input.ndim:
        return None
    out, dim = input, 0
    shape: list[int] = []
    for part in parts:
        if part is Ellipsis:
            shape.extend(input.shape[dim : dim + input.ndim - consumed])
            dim += input.ndim - consumed
        elif part is None:
            shape.append(1)
        elif isinstance(part, slice):
            start, stop, step = part.indices(input.shape[dim])
            if step != 1:
                return None
            length = max(0, stop - start)
            out = out if length == input.shape[dim] else narrow(out, dim, start, length)
            shape.append(length)
            dim += 1
        else:
            size = input.shape[dim]
            if not -size <= part < size:
                return None
            out = narrow(out, dim, part % size, 1)
            dim += 1
    return reshape(out, [*shape, *input.shape[dim:]])


def getitem(input: Tensor, key: Any) -> Tensor:
    """``input[key]`` for ints, slices (positive steps), None, Ellipsis, bool masks and integer
    tensors or lists, as torch indexes; the result is a copy, not a view. Keys of ints and unit-step
    slices cut with ``Slice`` (their gradient pads); the others gather at the selected positions."""
    sliced = _sliced(input, key)
    return sliced if sliced is not None else take(input, _positions(input, key))


def index_put(input: Tensor, key: Any, value: Tensor | float) -> Tensor:
    """``input`` with ``value`` (broadcast) written at ``input[key]``: what ``input[key] = value``
    stores, as a new tensor."""
    positions = _positions(input, key)
    values = to(value, input.dtype) if isinstance(value, Tensor) else as_tensor(value, input, input.dtype)
    return Put.apply(input, constant(positions, input, DEFAULT_INT), expand(values, list(positions.shape)))
