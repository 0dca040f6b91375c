"""The sequence and optional operators on the GPU.

A sequence is a :class:`spawnml.tensor.TensorSequence` of device tensors, never changed in
place: every kernel returns a new one. Positions and split sizes are read on the host; splits
and joins are strided copies. An optional holding a value is that value; an empty one is
:data:`spawnml.tensor.EMPTY_OPTIONAL`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dtypes import from_onnx
from ..errors import InvalidArgumentError
from ..ir import Node
from ..ops.defs.control import FLOAT_CODE
from ..tensor import EMPTY_OPTIONAL, TensorSequence
from .array import PHYSICAL, DeviceArray
from .host import to_host
from .shapes import axis_index, contiguous_strides
from .table import GPU_KERNELS, GPUContext, concatenate, copy_strided


def _position(ctx: GPUContext, position: DeviceArray, size: int, insert: bool = False) -> int:
    """A position in ``[-size, size)`` (``[-size, size]`` to insert) counted from the front."""
    index = int(to_host(ctx, position).reshape(-1)[0])
    end = size + 1 if insert else size
    if not -size <= index < end:
        raise InvalidArgumentError(f"position {index} is out of range for a sequence of {size} tensors")
    return index + size if index < 0 else index


def _joining(dtype: np.dtype | None, tensor: DeviceArray) -> None:
    if dtype is not None and tensor.dtype != dtype:
        raise InvalidArgumentError(f"a sequence of {dtype} cannot hold a tensor of {tensor.dtype}")


def _held_dtype(node: Node, opset: int) -> str | None:
    dtype = from_onnx(int(node.attrs.get("dtype", FLOAT_CODE)))
    return None if dtype in PHYSICAL else f"sequences of {dtype} are not held on the GPU"


@GPU_KERNELS.register("SequenceEmpty", since=11, check=_held_dtype)
def sequence_empty(ctx: GPUContext) -> TensorSequence:
    return TensorSequence((), from_onnx(int(ctx.attrs.get("dtype", FLOAT_CODE))))


@GPU_KERNELS.register("SequenceConstruct", since=11)
def sequence_construct(ctx: GPUContext, *tensors: DeviceArray) -> TensorSequence:
    for tensor in tensors[1:]:
        _joining(tensors[0].dtype, tensor)
    return TensorSequence(tuple(tensors), tensors[0].dtype)


@GPU_KERNELS.register("SequenceInsert", since=11)
def sequence_insert(
    ctx: GPUContext, sequence: TensorSequence, tensor: DeviceArray, position: DeviceArray | None = None
) -> TensorSequence:
    _joining(sequence.dtype, tensor)
    items = list(sequence.items)
    at = len(items) if position is None else _position(ctx, position, len(items), insert=True)
    items.insert(at, tensor)
    return TensorSequence(tuple(items), tensor.dtype)


@GPU_KERNELS.register("SequenceErase", since=11)
def sequence_erase(
    ctx: GPUContext, sequence: TensorSequence, position: DeviceArray | None = None
) -> TensorSequence:
    items = list(sequence.items)
    del items[-1 if position is None else _position(ctx, position, len(items))]
    return TensorSequence(tuple(items), sequence.dtype)


@GPU_KERNELS.register("SequenceAt", since=11)
def sequence_at(ctx: GPUContext, sequence: TensorSequence, position: DeviceArray) -> DeviceArray:
    return sequence.items[_position(ctx, position, len(sequence))]


@GPU_KERNELS.register("SequenceLength", since=11)
def sequence_length(ctx: GPUContext, sequence: TensorSequence) -> DeviceArray:
    return ctx.backend.from_numpy(np.array(len(sequence), np.int64))


def _piece(ctx: GPUContext, x: DeviceArray, axis: int, start: int, count: int) -> DeviceArray:
    """``count`` entries of ``x`` from ``start`` along ``axis``, copied."""
    shape = [*x.shape[:axis], count, *x.shape[axis + 1 :]]
    out = ctx.backend.empty(shape, x.dtype)
    if out.size:
        strides = contiguous_strides(x.shape)
        copy_strided(ctx, x, out, shape, strides, contiguous_strides(shape), src_offset=start * strides[axis])
    return out


def _split_sizes(split: np.ndarray, size: int) -> list[int]:
    if split.ndim == 0:
        chunk = int(split)
        if chunk <= 0:
            raise InvalidArgumentError(f"split size {chunk} is not positive")
        return [chunk] * (size // chunk) + ([size % chunk] if size % chunk else [])
    sizes = [int(item) for item in split]
    if sum(sizes) != size or min(sizes, default=0) < 0:
        raise InvalidArgumentError(f"split sizes {sizes} do not cover an axis of size {size}")
    return sizes


@GPU_KERNELS.register("SplitToSequence", since=11)
def split_to_sequence(ctx: GPUContext, data: DeviceArray, split: DeviceArray | None = None) -> TensorSequence:
    """Pieces of ``data`` along ``axis``, sized by ``split`` (a scalar: the size of every piece but
    a shorter last one), or of one element each, the axis dropped unless ``keepdims``."""
    axis = axis_index(int(ctx.attrs.get("axis", 0)), len(data.shape))
    size = data.shape[axis]
    sizes = [1] * size if split is None else _split_sizes(to_host(ctx, split), size)
    starts: Sequence[int] | np.ndarray = (
        np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int) if sizes else []
    )
    pieces: Sequence[DeviceArray] = [
        _piece(ctx, data, axis, s, n) for s, n in zip(starts, sizes, strict=True)
    ]
    if split is None and not ctx.attrs.get("keepdims", 1):
        pieces = [p.view((*p.shape[:axis], *p.shape[axis + 1 :])) for p in pieces]
    return TensorSequence(tuple(pieces), data.dtype)


@GPU_KERNELS.register("ConcatFromSequence", since=11)
def concat_from_sequence(ctx: GPUContext, sequence: TensorSequence) -> DeviceArray:
    """The tensors joined along ``axis``, or stacked on a new one (``new_axis``)."""
    if not len(sequence):
        raise InvalidArgumentError("cannot concatenate an empty sequence")
    items: list[DeviceArray] = list(sequence.items)
    rank = len(items[0].shape)
    if ctx.attrs.get("new_axis", 0):
        axis = axis_index(int(ctx.attrs["axis"]), rank + 1)
        items = [x.view((*x.shape[:axis], 1, *x.shape[axis:])) for x in items]
    else:
        axis = axis_index(int(ctx.attrs["axis"]), rank)
    return concatenate(ctx, items, axis)


@GPU_KERNELS.register("Optional", since=15)
def optional(ctx: GPUContext, value: Any = None) -> Any:
    return EMPTY_OPTIONAL if value is None else value


@GPU_KERNELS.register("OptionalHasElement", since=15)
def optional_has_element(ctx: GPUContext, value: Any = None) -> DeviceArray:
    return ctx.backend.from_numpy(np.array(value is not None and value is not EMPTY_OPTIONAL))


@GPU_KERNELS.register("OptionalGetElement", since=15)
def optional_get_element(ctx: GPUContext, value: Any) -> Any:
    if value is EMPTY_OPTIONAL:
        raise InvalidArgumentError("the optional is empty")
    return value
