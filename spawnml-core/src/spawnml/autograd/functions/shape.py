"""Cutting and joining: ``narrow``, constant padding, ``cat``, ``stack``, ``split``, ``chunk``."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import run, sizes
from ..function import BackwardNode, Function
from .creation import zeros
from .dims import normalize_dims
from .movement import squeeze, unsqueeze
from .promotion import as_tensor, result_type


class Narrow(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dim: int, start: int, length: int) -> Tensor:
        ctx.dim, ctx.before, ctx.after = dim, start, x.shape[dim] - start - length
        index = [sizes([v], x) for v in (start, start + length, dim)]
        return run("Slice", [x, *index])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None, None]:
        pads = [0] * (2 * grad.ndim)
        pads[ctx.dim], pads[grad.ndim + ctx.dim] = ctx.before, ctx.after
        return ConstantPad.apply(grad, pads, 0.0), None, None, None


def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """Elements ``start`` to ``start + length`` along ``dim`` (``start`` may count from the end)."""
    axis = normalize_dims(dim, input.ndim)[0]
    size = input.shape[axis]
    if not -size <= start <= size:
        raise InvalidArgumentError(
            f"start out of range (expected to be in range of [{-size}, {size}], but got {start})"
        )
    start = start + size if start < 0 else start
    if length < 0 or start + length > size:
        raise InvalidArgumentError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return Narrow.apply(input, axis, start, length)


class ConstantPad(Function):
    """ONNX ``pads`` order: every dimension's begin, then every dimension's end (negative crops)."""

    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, pads: list[int], value: float) -> Tensor:
        ctx.pads = pads
        return run("Pad", [x, sizes(pads, x), as_tensor(value, x, x.dtype)], mode="constant")

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None, None]:
        return ConstantPad.apply(grad, [-p for p in ctx.pads], 0.0), None, None


def _skipped(t: Tensor) -> bool:
    """torch's ``cat`` leaves out 1-D empty tensors whatever the other shapes."""
    return t.ndim == 1 and t.shape[0] == 0


class Cat(Function):
    @staticmethod
    def forward(ctx: BackwardNode, dim: int, *tensors: Tensor) -> Tensor:
        ctx.dim, ctx.sizes = dim, [None if _skipped(t) else t.shape[dim] for t in tensors]
        joined = [t for t in tensors if not _skipped(t)]
        return run("Concat", joined, axis=dim) if joined else tensors[0]

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor | None, ...]:
        grads: list[Tensor | None] = [None]
        start = 0
        for size, needed in zip(ctx.sizes, ctx.needs_input_grad[1:], strict=True):
            if size is None:
                grads.append(zeros(0, dtype=grad.dtype, device=grad.device) if needed else None)
                continue
            grads.append(Narrow.apply(grad, ctx.dim, start, size) if needed else None)
            start += size
        return tuple(grads)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """The tensors joined along ``dim`` (1-D empty tensors are left out, as torch does)."""
    if not tensors:
        raise InvalidArgumentError("torch.cat(): expected a non-empty list of Tensors")
    joined = [t for t in tensors if not _skipped(t)] or list(tensors[:1])
    reference = joined[0]
    axis = normalize_dims(dim, reference.ndim)[0]
    for index, t in enumerate(joined):
        if t.ndim != reference.ndim:
            raise InvalidArgumentError(
                f"Tensors must have same number of dimensions: got {reference.ndim} and {t.ndim}"
            )
        for d in range(t.ndim):
            if d != axis and t.shape[d] != reference.shape[d]:
                raise InvalidArgumentError(
                    f"Sizes of tensors must match except in dimension {axis}. Expected size "
                    f"{reference.shape[d]} but got size {t.shape[d]} for tensor number {index} in the list."
                )
    dtype = result_type(*tensors)
    return Cat.apply(axis, *(as_tensor(t, t, dtype) for t in tensors))


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """The tensors (all of one shape) joined along a new dimension ``dim``."""
    if not tensors:
        raise InvalidArgumentError("stack expects a non-empty TensorList")
    for index, t in enumerate(tensors):
        if t.shape != tensors[0].shape:
            raise InvalidArgumentError(
                f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} at entry 0 "
                f"and {list(t.shape)} at entry {index}"
            )
    axis = normalize_dims(dim, tensors[0].ndim + 1)[0]
    return cat([unsqueeze(t, axis) for t in tensors], axis)


def split(tensor: Tensor, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces along ``dim``: of ``split_size`` each (the last may be smaller), or of the listed sizes."""
    axis = normalize_dims(dim, tensor.ndim)[0]
    size = tensor.shape[axis]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step < 0 or (step == 0 and size):
            raise InvalidArgumentError(
                f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}"
            )
        sizes = [min(step, size - start) for start in range(0, size, step or 1)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != size:
            raise InvalidArgumentError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at "
                f"dimension {axis}), but got split_sizes={sizes}"
            )
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return tuple(Narrow.apply(tensor, axis, start, n) for start, n in zip(starts, sizes, strict=True))


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along ``dim``, without that dimension."""
    axis = normalize_dims(dim, input.ndim)[0]
    return tuple(squeeze(Narrow.apply(input, axis, i, 1), axis) for i in range(input.shape[axis]))


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """At most ``chunks`` pieces of equal size along ``dim`` (the last may be smaller)."""
    if chunks <= 0:
        raise InvalidArgumentError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    axis = normalize_dims(dim, input.ndim)[0]
    size = input.shape[axis]
    if size == 0:
        return tuple(Narrow.apply(input, axis, 0, 0) for _ in range(chunks))
    return split(input, -(-size // chunks), axis)
