"""Resize and Upsample, one axis at a time: each output position reads a few input taps
with weights (one tap without weights for nearest). Coordinates are computed in float32,
in the order onnxruntime uses, so that nearest picks the same pixels. Integer inputs
interpolate in floating point and truncate, as onnxruntime does.

Nearest resizing of the last two axes, the images' height and width, is one pass of a
compiled loop (:mod:`.loops_resample`) that copies elements as unsigned words of their size;
other axes, and elements that are Python objects or of other sizes, are gathered by numpy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from spawnml.backend import KernelContext
from spawnml.ops.defs.nn import CROP, LEGACY_NEAREST, check_legacy_resize, check_resize, legacy_resize_attrs
from spawnml.ops.shapes import as_text, normalize_axis, resize_output

from .nn_common import compute_dtype
from .table import KERNELS

F32 = np.float32
#: The unsigned words the compiled nearest loop copies elements as, by element size.
WORDS = {size: np.dtype(f"u{size}") for size in (1, 2, 4, 8)}


@dataclass(frozen=True)
class Axis:
    """One axis to resample: its sizes, scale and region of interest."""

    size: int
    out: int
    scale: F32
    roi: tuple[F32, F32] = (F32(0), F32(1))


@dataclass(frozen=True)
class Taps:
    """For every output position, ``(taps, out)`` input indices and weights (None: nearest)."""

    index: np.ndarray
    weight: np.ndarray | None
    outside: np.ndarray | None = None


def source_coords(axis: Axis, transform: str) -> np.ndarray:
    """Where each output position of ``axis`` lies in input coordinates."""
    x = np.arange(axis.out, dtype=F32)
    size, out, scale = F32(axis.size), F32(axis.out), axis.scale
    if transform == "half_pixel":
        return (x + F32(0.5)) / scale - F32(0.5)
    if transform == "half_pixel_symmetric":  # the last sum in float64, as onnxruntime takes it
        offset = np.float64(size / F32(2) * (F32(1) - out / (scale * size)))
        return (offset + (x.astype(np.float64) + 0.5) / np.float64(scale) - 0.5).astype(F32)
    if transform == "pytorch_half_pixel":
        return (x + F32(0.5)) / scale - F32(0.5) if axis.out > 1 else np.zeros(1, F32)
    if transform == "tf_half_pixel_for_nn":
        return (x + F32(0.5)) / scale
    if transform == "align_corners":
        return x * (size - F32(1)) / (out - F32(1)) if axis.out > 1 else np.zeros(1, F32)
    if transform == CROP:
        start, end = axis.roi
        if axis.out == 1:
            return np.full(1, 0.5 * (start + end) * (size - 1), F32)
        return start * (size - F32(1)) + x * (end - start) * (size - F32(1)) / (out - F32(1))
    return x / scale  # asymmetric


def _nearest_index(coords: np.ndarray, mode: str, shrinking: bool) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.ceil(coords - F32(0.5))
    if mode == "round_prefer_ceil":
        return np.floor(coords + F32(0.5))
    if mode == "floor" or (mode == LEGACY_NEAREST and not shrinking):
        return np.floor(coords)
    return np.ceil(coords)  # ceil, or legacy when shrinking


def cubic_weights(distance: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with coefficient ``a`` at ``distance``."""
    d = np.abs(distance)
    c = F32(a)
    near = ((c + F32(2)) * d - (c + F32(3))) * d * d + F32(1)
    far = ((c * d - F32(5) * c) * d + F32(8) * c) * d - F32(4) * c
    return np.where(d <= 1, near, np.where(d < 2, far, F32(0)))


def _filter(mode: str, attrs: dict) -> tuple[float, Callable[[np.ndarray], np.ndarray]]:
    """Half-width and weight function of the linear or cubic interpolation filter."""
    if mode == "linear":
        return 1.0, lambda d: np.maximum(F32(1) - np.abs(d), F32(0))
    return 2.0, lambda d: cubic_weights(d, attrs["cubic_coeff_a"])


def _interpolating_taps(coords: np.ndarray, axis: Axis, attrs: dict, mode: str) -> Taps:
    """Linear or cubic taps around ``coords``, clamped to the edge; an antialiased filter
    widens by ``1 / scale`` when shrinking and is normalized, as is one that excludes taps
    outside the input."""
    half_width, weigh = _filter(mode, attrs)
    antialias = bool(attrs.get("antialias", 0)) and axis.scale < 1
    exclude = bool(attrs.get("exclude_outside", 0))
    stretch = axis.scale if antialias else F32(1)
    reach = int(np.ceil(half_width / stretch))
    index = np.floor(coords).astype(np.int64)[None, :] + np.arange(1 - reach, reach + 1)[:, None]
    weight = weigh((index - coords[None, :]).astype(F32) * stretch)
    if exclude:
        weight = np.where((index >= 0) & (index < axis.size), weight, F32(0))
    if antialias or exclude:
        weight = weight / weight.sum(axis=0, keepdims=True)
    return Taps(np.clip(index, 0, axis.size - 1), weight.astype(F32))


def axis_taps(axis: Axis, attrs: dict) -> Taps:
    """The taps of one axis for the node's mode and coordinate transformation."""
    transform = as_text(attrs["coordinate_transformation_mode"])
    mode = as_text(attrs["mode"])
    coords = source_coords(axis, transform)
    outside = None
    if transform == CROP:
        outside = (coords < 0) | (coords > F32(axis.size - 1))
    if mode == "nearest":
        index = _nearest_index(coords, as_text(attrs["nearest_mode"]), bool(axis.scale < 1)).astype(np.int64)
        taps = Taps(np.clip(index, 0, axis.size - 1)[None, :], None)
    else:
        taps = _interpolating_taps(coords, axis, attrs, mode)
    return Taps(taps.index, taps.weight, outside)


def _resample_axis(x: np.ndarray, dim: int, taps: Taps) -> np.ndarray:
    count, out = taps.index.shape
    gathered = np.take(x, taps.index.ravel(), axis=dim)
    if taps.weight is None:
        return gathered
    gathered = gathered.reshape(*x.shape[:dim], count, out, *x.shape[dim + 1 :])
    weight = taps.weight.reshape(count, out, *(1,) * (x.ndim - dim - 1))
    return (gathered * weight).sum(axis=dim)


def _nearest_last_axes(x: np.ndarray, rows: np.ndarray | None, columns: np.ndarray | None) -> np.ndarray:
    """``x[..., rows, :][..., columns]`` (None: the axis as it is) in one pass of the compiled loop."""
    from . import loops_resample

    planes = np.ascontiguousarray(x if x.ndim > 1 else x[None])
    *lead, height, width = planes.shape
    rows = np.arange(height) if rows is None else rows
    columns = np.arange(width) if columns is None else columns
    y = np.empty((*lead, rows.size, columns.size), dtype=x.dtype)
    if y.size:
        word = WORDS[x.dtype.itemsize]
        source = planes.reshape(-1, height, width).view(word)
        loops_resample.nearest2d(source, rows, columns, y.reshape(-1, rows.size, columns.size).view(word))
    return y if x.ndim > 1 else y[0]


def _rois(roi: np.ndarray | None, rank: int, axes: Sequence[int]) -> list[tuple[F32, F32]]:
    full = [(F32(0), F32(1))] * rank
    if roi is None or roi.size == 0:
        return full
    values = roi.astype(F32).ravel()
    for i, dim in enumerate(axes):
        full[dim] = (values[i], values[i + len(axes)])
    return full


def resample(
    x: np.ndarray,
    attrs: dict,
    scales: np.ndarray | None,
    sizes: np.ndarray | None,
    roi: np.ndarray | None = None,
) -> np.ndarray:
    """Resize ``x`` to ``scales`` or ``sizes`` under the attributes of a Resize node."""
    scales = None if scales is None or scales.size == 0 else scales.astype(F32).tolist()
    sizes = None if sizes is None or sizes.size == 0 else sizes.tolist()
    axes = [normalize_axis(a, x.ndim) for a in attrs["axes"]] if attrs.get("axes") else list(range(x.ndim))
    policy = as_text(attrs.get("keep_aspect_ratio_policy", "stretch"))
    out, factors = resize_output(x.shape, scales, sizes, axes, policy)
    rois = _rois(roi, x.ndim, axes)
    crop = as_text(attrs["coordinate_transformation_mode"]) == CROP
    nearest = as_text(attrs["mode"]) == "nearest"
    y = x if nearest else x.astype(np.promote_types(compute_dtype(x.dtype), F32), copy=False)
    outside = np.zeros((1,) * x.ndim, dtype=bool)
    compiled = nearest and x.dtype.itemsize in WORDS and not x.dtype.hasobject
    last: dict[int, np.ndarray] = {}  # nearest indices of the last two axes, for the compiled loop
    for dim in range(x.ndim):
        axis = Axis(x.shape[dim], out[dim], F32(factors[dim]), rois[dim])
        if axis.out == axis.size and axis.scale == 1 and not crop:
            continue
        taps = axis_taps(axis, attrs)
        if compiled and dim >= x.ndim - 2:
            last[dim - x.ndim] = taps.index[0]
        else:
            y = _resample_axis(y, dim, taps)
        if taps.outside is not None:
            outside = outside | taps.outside.reshape(-1, *(1,) * (x.ndim - dim - 1))
    if last:
        y = _nearest_last_axes(y, last.get(-2), last.get(-1))
    if crop and outside.any():
        y = np.where(outside, y.dtype.type(attrs["extrapolation_value"]), y)
    return _cast_like(y, x.dtype)


def _cast_like(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if np.issubdtype(dtype, np.integer) and not np.issubdtype(y.dtype, np.integer):
        info = np.iinfo(dtype)
        return np.clip(np.trunc(y), info.min, info.max).astype(dtype)
    return y.astype(dtype, copy=False)


@KERNELS.register("Resize", since=10, until=11, check=check_legacy_resize)
def _resize_10(ctx: KernelContext, x: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return resample(x, legacy_resize_attrs(ctx.attrs), scales, None)


@KERNELS.register("Resize", since=11, check=check_resize)
def _resize(
    ctx: KernelContext,
    x: np.ndarray,
    roi: np.ndarray | None = None,
    scales: np.ndarray | None = None,
    sizes: np.ndarray | None = None,
) -> np.ndarray:
    return resample(x, ctx.attrs, scales, sizes, roi)


@KERNELS.register("Upsample", since=7, until=9, check=check_legacy_resize)
def _upsample_7(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return resample(x, legacy_resize_attrs(ctx.attrs), np.asarray(ctx.attrs["scales"], dtype=F32), None)


@KERNELS.register("Upsample", since=9, until=10, check=check_legacy_resize)
def _upsample_9(ctx: KernelContext, x: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return resample(x, legacy_resize_attrs(ctx.attrs), scales, None)
