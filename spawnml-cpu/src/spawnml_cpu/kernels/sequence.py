"""CPU kernels of the sequence and optional operators.

A sequence is a :class:`spawnml.tensor.TensorSequence` of numpy arrays, never changed in
place: every kernel returns a new one. An optional holding a value is that value; an
empty one is :data:`spawnml.tensor.EMPTY_OPTIONAL`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from spawnml.backend import KernelContext
from spawnml.dtypes import from_onnx
from spawnml.errors import InvalidArgumentError
from spawnml.ir import Node
from spawnml.ops.defs.control import FLOAT_CODE
from spawnml.tensor import EMPTY_OPTIONAL, TensorSequence

from .table import KERNELS

INT64 = np.dtype(np.int64)

# ---------------------------------------------------------------------------- helpers


def _position(position: np.ndarray, size: int, insert: bool = False) -> int:
    """A position in ``[-size, size)`` (``[-size, size]`` to insert) counted from the front."""
    index = int(np.asarray(position).item())
    end = size + 1 if insert else size
    if not -size <= index < end:
        raise IndexError(f"position {index} is out of range for a sequence of {size} tensors")
    return index + size if index < 0 else index


def _check_joins(dtype: np.dtype | None, tensor: np.ndarray) -> None:
    """Raise when ``tensor`` cannot join a sequence of ``dtype``: its tensors share one element type."""
    if dtype is not None and tensor.dtype != dtype:
        raise TypeError(f"a sequence of {dtype} cannot hold a tensor of {tensor.dtype}")


def _sequence(items: list[np.ndarray] | tuple[np.ndarray, ...], dtype: np.dtype | None) -> TensorSequence:
    return TensorSequence(tuple(items), dtype)


# ---------------------------------------------------------------------------- building


def _known_dtype(node: Node, opset: int) -> str | None:
    try:
        from_onnx(node.attrs.get("dtype", FLOAT_CODE))
    except InvalidArgumentError as error:
        return str(error)
    return None


@KERNELS.register("SequenceEmpty", since=11, check=_known_dtype)
def sequence_empty(ctx: KernelContext) -> TensorSequence:
    return _sequence((), from_onnx(ctx.attrs["dtype"]))


@KERNELS.register("SequenceConstruct", since=11)
def sequence_construct(ctx: KernelContext, *tensors: np.ndarray) -> TensorSequence:
    for tensor in tensors[1:]:
        _check_joins(tensors[0].dtype, tensor)
    return _sequence(tensors, tensors[0].dtype)


@KERNELS.register("SequenceInsert", since=11)
def sequence_insert(
    ctx: KernelContext, sequence: TensorSequence, tensor: np.ndarray, position: np.ndarray | None = None
) -> TensorSequence:
    _check_joins(sequence.dtype, tensor)
    items = list(sequence.items)
    items.insert(len(items) if position is None else _position(position, len(items), insert=True), tensor)
    return _sequence(items, tensor.dtype)


@KERNELS.register("SequenceErase", since=11)
def sequence_erase(
    ctx: KernelContext, sequence: TensorSequence, position: np.ndarray | None = None
) -> TensorSequence:
    items = list(sequence.items)
    del items[-1 if position is None else _position(position, len(items))]
    return _sequence(items, sequence.dtype)


@KERNELS.register("SplitToSequence", since=11)
def split_to_sequence(
    ctx: KernelContext, data: np.ndarray, split: np.ndarray | None = None
) -> TensorSequence:
    """Pieces of ``data`` along ``axis``, sized by ``split``, or of one element each.

    A scalar ``split`` is the size of every piece but a shorter last one; a 1-D one lists
    the sizes. Without ``split``, ``keepdims=0`` drops the split axis from the pieces.
    """
    axis = ctx.attrs["axis"]
    size = data.shape[axis]
    if split is None:
        pieces = np.split(data, size, axis) if size else []
        if not ctx.attrs["keepdims"]:
            pieces = [np.squeeze(piece, axis) for piece in pieces]
        return _sequence(pieces, data.dtype)
    return _sequence(np.split(data, np.cumsum(_split_sizes(split, size))[:-1], axis), data.dtype)


def _split_sizes(split: np.ndarray, size: int) -> list[int]:
    if split.ndim == 0:
        chunk = int(split)
        if chunk <= 0:
            raise ValueError(f"split size {chunk} is not positive")
        return [chunk] * (size // chunk) + ([size % chunk] if size % chunk else [])
    sizes = [int(item) for item in split]
    if sum(sizes) != size or min(sizes, default=0) < 0:
        raise ValueError(f"split sizes {sizes} do not cover an axis of size {size}")
    return sizes


# ---------------------------------------------------------------------------- reading


@KERNELS.register("SequenceAt", since=11)
def sequence_at(ctx: KernelContext, sequence: TensorSequence, position: np.ndarray) -> np.ndarray:
    return sequence.items[_position(position, len(sequence))]


@KERNELS.register("SequenceLength", since=11)
def sequence_length(ctx: KernelContext, sequence: TensorSequence) -> np.ndarray:
    return np.array(len(sequence), INT64)


@KERNELS.register("ConcatFromSequence", since=11)
def concat_from_sequence(ctx: KernelContext, sequence: TensorSequence) -> np.ndarray:
    if not len(sequence):
        raise ValueError("cannot concatenate an empty sequence")
    join = np.stack if ctx.attrs["new_axis"] else np.concatenate
    return join(sequence.items, axis=ctx.attrs["axis"])


# ---------------------------------------------------------------------------- optionals


@KERNELS.register("Optional", since=15)
def optional(ctx: KernelContext, value: Any = None) -> Any:
    return EMPTY_OPTIONAL if value is None else value


@KERNELS.register("OptionalHasElement", since=15)
def optional_has_element(ctx: KernelContext, value: Any = None) -> np.ndarray:
    return np.array(value is not None and value is not EMPTY_OPTIONAL)


@KERNELS.register("OptionalGetElement", since=15)
def optional_get_element(ctx: KernelContext, value: Any) -> Any:
    if value is EMPTY_OPTIONAL:
        raise ValueError("the optional is empty")
    return value
