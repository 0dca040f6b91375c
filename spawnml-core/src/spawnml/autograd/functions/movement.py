"""Shape and layout: reshape, expand, transpose, permute, squeeze, and moves between devices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import InvalidArgumentError
from ...tensor import Tensor, backend_named
from ..dispatch import moved, run, sizes
from ..function import BackwardNode, Function
from .dims import normalize_dims
from .promotion import cast


def shape_arg(shape: tuple[Any, ...]) -> list[int]:
    """``reshape(2, 3)`` and ``reshape((2, 3))`` alike."""
    return list(shape[0]) if len(shape) == 1 and isinstance(shape[0], Sequence) else list(shape)


def _resolved(shape: list[int], numel: int, original: Sequence[int]) -> list[int]:
    known = 1
    for n in shape:
        known *= n if n != -1 else 1
    if shape.count(-1) > 1:
        raise InvalidArgumentError("only one dimension can be inferred")
    if -1 in shape:
        if known == 0 or numel % known:
            raise InvalidArgumentError(f"shape '{shape}' is invalid for input of size {numel}")
        shape = [numel // known if n == -1 else n for n in shape]
    if int(np.prod(shape)) != numel:
        raise InvalidArgumentError(f"shape '{shape}' is invalid for input of size {numel}")
    return shape


class Reshape(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, shape: list[int]) -> Tensor:
        ctx.shape = x.shape
        return run("Reshape", [x, sizes(shape, x)], allowzero=1)  # a 0 is a size

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None]:
        return reshape(grad, ctx.shape), None


def reshape(input: Tensor, *shape: Any) -> Tensor:
    """The same elements in ``shape`` (one ``-1`` is inferred)."""
    return Reshape.apply(input, _resolved(shape_arg(shape), input.numel(), input.shape))


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if input.ndim == 0:
        return reshape(input, 1)
    start, end = normalize_dims(start_dim, input.ndim)[0], normalize_dims(end_dim, input.ndim)[0]
    shape = list(input.shape)
    return reshape(input, [*shape[:start], int(np.prod(shape[start : end + 1])), *shape[end + 1 :]])


class Permute(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dims: list[int]) -> Tensor:
        ctx.dims = dims
        return run("Transpose", [x], perm=dims)

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None]:
        return Permute.apply(grad, list(np.argsort(ctx.dims))), None


def permute(input: Tensor, *dims: Any) -> Tensor:
    """The dimensions reordered: output dimension ``i`` is input dimension ``dims[i]``."""
    order = [d % max(input.ndim, 1) for d in shape_arg(dims)]
    if sorted(order) != list(range(input.ndim)):
        raise InvalidArgumentError(
            f"permute(): dims {list(shape_arg(dims))} are not a permutation of {input.ndim}"
        )
    return Permute.apply(input, order)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """``input`` with dimensions ``dim0`` and ``dim1`` swapped."""
    a, b = (normalize_dims(d, input.ndim)[0] for d in (dim0, dim1))
    if a == b:
        return input
    order = list(range(input.ndim))
    order[a], order[b] = order[b], order[a]
    return Permute.apply(input, order)


def t(input: Tensor) -> Tensor:
    """A matrix transposed (vectors and scalars as they are)."""
    if input.ndim > 2:
        raise InvalidArgumentError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else input


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """``input`` with a size-1 dimension inserted at ``dim``."""
    position = normalize_dims(dim, input.ndim + 1)[0]
    shape = list(input.shape)
    return reshape(input, [*shape[:position], 1, *shape[position:]])


def squeeze(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """``input`` without its size-1 dimensions (only those in ``dim`` when given)."""
    dims = range(input.ndim) if dim is None else normalize_dims(dim, input.ndim)
    shape = [n for i, n in enumerate(input.shape) if not (i in dims and n == 1)]
    return reshape(input, shape) if len(shape) != input.ndim else input


class ToDevice(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, device: str) -> Tensor:
        ctx.source = x.device
        return moved(x, backend_named(device))

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None]:
        return ToDevice.apply(grad, ctx.source), None


class ToType(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, dtype: np.dtype) -> Tensor:
        ctx.source = x.dtype
        return cast(x, dtype)

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor, None]:
        return ToType.apply(grad, ctx.source), None


def to(input: Tensor, *args: Any, device: str | None = None, dtype: Any = None) -> Tensor:
    """``input`` on another device and/or of another element type, as ``Tensor.to`` takes them:
    ``to("webgpu")``, ``to(spawnml.float64)``, ``to("cpu", spawnml.float32)``, ``to(other_tensor)``."""
    for arg in args:
        if isinstance(arg, Tensor):
            device, dtype = arg.device, arg.dtype
        elif isinstance(arg, str) and arg not in np.sctypeDict:
            device = arg
        else:
            dtype = arg
    if dtype is not None and np.dtype(dtype) != input.dtype:
        input = ToType.apply(input, np.dtype(dtype))
    if device is not None and device != input.device:
        input = ToDevice.apply(input, device)
    return input
