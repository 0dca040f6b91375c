"""Helpers for shape-inference functions: broadcasting and common output rules."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, overload

import numpy as np

from ..errors import InvalidGraphError
from ..ir import Dim, Shape
from .schema import InferenceContext, TensorType


@overload
def broadcast(*shapes: tuple[Dim, ...]) -> tuple[Dim, ...]: ...
@overload
def broadcast(*shapes: Shape) -> Shape: ...
def broadcast(*shapes: Shape) -> Shape:
    """Numpy-style multidirectional broadcast of possibly symbolic shapes."""
    known = [shape for shape in shapes if shape is not None]
    if len(known) < len(shapes):
        return None
    rank = max(map(len, known), default=0)
    padded = [(1,) * (rank - len(shape)) + tuple(shape) for shape in known]
    return tuple(map(_broadcast_dim, zip(*padded, strict=True)))


def _broadcast_dim(dims: Sequence[Dim]) -> Dim:
    others = [dim for dim in dims if dim != 1]
    if not others:
        return 1
    first = others[0]
    if all(dim == first and type(dim) is type(first) for dim in others):
        return first  # one size, one name or all unknown: what the rules below give
    known = {dim for dim in dims if isinstance(dim, int) and dim != 1}
    if len(known) > 1:
        raise InvalidGraphError(f"dimensions {list(dims)} do not broadcast")
    if known:
        return known.pop()
    return others[0] if all(dim == others[0] for dim in others) else None


def normalize_axis(axis: int, rank: int) -> int:
    """Map a possibly negative axis into ``[0, rank)``."""
    if not -rank <= axis < max(rank, 1):
        raise InvalidGraphError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def same_as_input(index: int = 0):
    """Infer: one output with the dtype and shape of input ``index``."""

    def infer(ctx: InferenceContext) -> list[TensorType]:
        source = ctx.input(index)
        return [source if source is not None else TensorType(None, None)]

    return infer


def broadcast_inputs(dtype_from: int | None = 0, output_dtype=None):
    """Infer: one output broadcast over all present inputs; dtype from an input or fixed."""

    def infer(ctx: InferenceContext) -> list[TensorType]:
        present = [t for t in ctx.inputs if t is not None]
        shape = broadcast(*(t.shape for t in present))
        if output_dtype is not None:
            dtype = output_dtype
        else:
            source = ctx.input(dtype_from) if dtype_from is not None else None
            dtype = source.dtype if source is not None else None
        return [TensorType(dtype, shape)]

    return infer


def as_text(value: str | bytes) -> str:
    """A string attribute as ``str``, whether it was kept as bytes or decoded."""
    return value.decode() if isinstance(value, bytes) else value


def window_axis(
    size: Dim, kernel: int, stride: int, dilation: int, pads: tuple[int, int], auto_pad: str, ceil_mode: bool
) -> tuple[Dim, int, int]:
    """Output size and begin/end padding of a sliding window (convolution, pooling) on one axis.

    With ``ceil_mode`` a last partial window is kept only if it starts inside the input or
    its begin padding. The pads of ``SAME_*`` are 0 while ``size`` is not known.
    """
    extent = (kernel - 1) * dilation + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if not isinstance(size, int):
            return None, 0, 0
        out = -(-size // stride)
        total = max((out - 1) * stride + extent - size, 0)
        begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        return out, begin, total - begin
    begin, end = (0, 0) if auto_pad == "VALID" else pads
    if not isinstance(size, int):
        return None, begin, end
    span = size + begin + end - extent
    if span < 0:
        raise InvalidGraphError(f"window of extent {extent} does not fit an axis of size {size} + pads")
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + begin:
        out -= 1
    return out, begin, end


def transposed_window_axis(
    size: Dim,
    kernel: int,
    stride: int,
    dilation: int,
    pads: tuple[int, int],
    auto_pad: str,
    output_padding: int,
    output_size: int | None,
) -> tuple[Dim, int, int]:
    """Output size and begin/end cropping of a transposed convolution on one axis."""
    if not isinstance(size, int):
        return output_size, 0, 0
    full = (size - 1) * stride + (kernel - 1) * dilation + 1 + output_padding
    if output_size is None and auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = (0, 0) if auto_pad == "VALID" else pads
        return full - begin - end, begin, end
    out = size * stride if output_size is None else output_size
    total = max(full - out, 0)
    begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
    return out, begin, total - begin


def window_attrs(attrs: Mapping[str, Any], kernel: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """Strides, dilations and ``pads`` (begins then ends) of a window node, with defaults."""
    count = len(kernel)
    strides = list(attrs.get("strides") or [1] * count)
    dilations = list(attrs.get("dilations") or [1] * count)
    pads = list(attrs.get("pads") or [0] * (2 * count))
    if not len(strides) == len(dilations) == count or len(pads) != 2 * count:
        raise InvalidGraphError(f"strides, dilations or pads do not match a {count}-d kernel")
    if min(strides + dilations, default=1) < 1 or min(kernel, default=1) < 1:
        raise InvalidGraphError(
            f"kernel {list(kernel)}, strides {strides} and dilations {dilations} must all be positive"
        )
    if min(pads, default=0) < 0:
        raise InvalidGraphError(f"pads {pads} must not be negative")
    return strides, dilations, pads


@overload
def sliding_windows(
    sizes: Sequence[int], attrs: Mapping[str, Any], kernel: Sequence[int]
) -> list[tuple[int, int, int]]: ...
@overload
def sliding_windows(
    sizes: Sequence[Dim], attrs: Mapping[str, Any], kernel: Sequence[int]
) -> Sequence[tuple[Dim, int, int]]: ...
def sliding_windows(
    sizes: Sequence[Dim], attrs: Mapping[str, Any], kernel: Sequence[int]
) -> Sequence[tuple[Dim, int, int]]:
    """:func:`window_axis` for every spatial axis of a Conv or pooling node."""
    strides, dilations, pads = window_attrs(attrs, kernel)
    auto_pad = as_text(attrs.get("auto_pad", "NOTSET"))
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    count = len(kernel)
    return [
        window_axis(size, k, s, d, (pads[i], pads[i + count]), auto_pad, ceil_mode)
        for i, (size, k, s, d) in enumerate(zip(sizes, kernel, strides, dilations, strict=True))
    ]


@overload
def transposed_windows(
    sizes: Sequence[int], attrs: Mapping[str, Any], kernel: Sequence[int]
) -> list[tuple[int, int, int]]: ...
@overload
def transposed_windows(
    sizes: Sequence[Dim], attrs: Mapping[str, Any], kernel: Sequence[int]
) -> Sequence[tuple[Dim, int, int]]: ...
def transposed_windows(
    sizes: Sequence[Dim], attrs: Mapping[str, Any], kernel: Sequence[int]
) -> Sequence[tuple[Dim, int, int]]:
    """:func:`transposed_window_axis` for every spatial axis of a ConvTranspose node."""
    strides, dilations, pads = window_attrs(attrs, kernel)
    auto_pad = as_text(attrs.get("auto_pad", "NOTSET"))
    count = len(kernel)
    output_padding = list(attrs.get("output_padding") or [0] * count)
    output_shape = attrs.get("output_shape")
    return [
        transposed_window_axis(
            size,
            kernel[i],
            strides[i],
            dilations[i],
            (pads[i], pads[i + count]),
            auto_pad,
            output_padding[i],
            None if output_shape is None else list(output_shape)[i - count],
        )
        for i, size in enumerate(sizes)
    ]


def constant_ints(ctx: InferenceContext, index: int) -> list[int] | None:
    """The values of a constant integer input as a flat list, or None when not constant."""
    value = ctx.constant(index)
    return None if value is None else [int(item) for item in value.reshape(-1)]


def dims_product(dims: Sequence[Dim]) -> Dim:
    """The product of dims: an int when all are known or one is 0, a lone symbol times ones, else None."""
    symbols = [dim for dim in dims if not isinstance(dim, int)]
    known = math.prod(dim for dim in dims if isinstance(dim, int))
    if not symbols:
        return known
    if len(symbols) == 1 and symbols[0] is not None and known == 1:
        return symbols[0]
    return 0 if known == 0 else None


@overload
def resize_output(
    shape: Sequence[int],
    scales: Sequence[float] | None,
    sizes: Sequence[float] | None,
    axes: Sequence[int] | None,
    policy: str,
) -> tuple[tuple[int, ...], list[float]]: ...
@overload
def resize_output(
    shape: Sequence[Dim],
    scales: Sequence[float] | None,
    sizes: Sequence[float] | None,
    axes: Sequence[int] | None,
    policy: str,
) -> tuple[tuple[Dim, ...], Sequence[float | None]]: ...
def resize_output(
    shape: Sequence[Dim],
    scales: Sequence[float] | None,
    sizes: Sequence[float] | None,
    axes: Sequence[int] | None,
    policy: str,
) -> tuple[tuple[Dim, ...], Sequence[float | None]]:
    """Output shape of Resize or Upsample and the scale of every axis.

    ``scales`` or ``sizes`` cover ``axes`` (all axes when None). Scaled sizes are floored
    from a float32 product; a ``not_larger``/``not_smaller`` policy applies one scale to
    every listed axis and rounds. A scale is None where it depends on an unknown size.
    """
    rank = len(shape)
    axes = [normalize_axis(axis, rank) for axis in axes] if axes else list(range(rank))
    given = scales if scales is not None else sizes
    if given is None or len(given) != len(axes):
        raise InvalidGraphError(f"Resize needs {len(axes)} scales or sizes, got {given}")
    out, factors = list(shape), [1.0 if isinstance(dim, int) else None for dim in shape]
    if scales is not None:
        for axis, scale in zip(axes, scales, strict=True):
            size = shape[axis]
            factors[axis] = float(scale)
            if isinstance(size, int):
                out[axis] = int(np.floor(np.float32(size) * np.float32(scale)))
            elif scale != 1:
                out[axis] = None
        return tuple(out), factors
    assert sizes is not None  # given is sizes
    ratios = [
        float(np.float32(size) / np.float32(shape[axis])) if isinstance(shape[axis], int) else None
        for axis, size in zip(axes, sizes, strict=True)
    ]
    if policy == "stretch":
        for axis, wanted, ratio in zip(axes, sizes, ratios, strict=True):
            out[axis], factors[axis] = int(wanted), ratio
        return tuple(out), factors
    known = [ratio for ratio in ratios if ratio is not None]
    common = None if len(known) < len(ratios) else (min if policy == "not_larger" else max)(known)
    for axis in axes:
        factors[axis] = common
        out[axis] = (
            None if common is None else int(np.floor(np.float32(common) * np.float32(shape[axis]) + 0.5))
        )
    return tuple(out), factors


def reduced_shape(shape: Shape, axes: Sequence[int] | None, keepdims: bool) -> Shape:
    """The shape left after reducing ``axes`` (every axis when None): kept as 1 or dropped."""
    if shape is None:
        return None
    rank = len(shape)
    chosen = set(range(rank)) if axes is None else {normalize_axis(axis, rank) for axis in axes}
    if keepdims:
        return tuple(1 if axis in chosen else dim for axis, dim in enumerate(shape))
    return tuple(dim for axis, dim in enumerate(shape) if axis not in chosen)
