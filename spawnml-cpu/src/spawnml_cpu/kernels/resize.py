"""Resize and Upsample, one axis at a time: each output position reads a few input taps
with weights (one tap without weights for nearest), as :mod:`spawnml.ops.resample` defines
them for every backend. Integer inputs interpolate in floating point and truncate, as
onnxruntime does.

Nearest resizing of the last two axes, the images' height and width, is one pass of a
compiled loop (:mod:`.loops_resample`) that copies elements as unsigned words of their size;
other axes, and elements that are Python objects or of other sizes, are gathered by numpy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from spawnml.backend import KernelContext
from spawnml.ops import resample as sampling
from spawnml.ops.defs.nn import CROP, check_legacy_resize, check_resize, legacy_resize_attrs
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


def axis_taps(axis: Axis, attrs: dict) -> Taps:
    """The taps of one axis for the node's mode and coordinate transformation."""
    index, weight = sampling.taps(axis.size, axis.out, axis.scale, attrs, axis.roi)
    crop = as_text(attrs["coordinate_transformation_mode"]) == CROP
    return Taps(
        index.astype(np.int64),
        None if as_text(attrs["mode"]) == "nearest" else weight,
        sampling.outside(axis.size, axis.out, axis.scale, attrs, axis.roi) if crop else None,
    )


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
    axis_rois = sampling.rois(roi, x.ndim, axes)
    crop = as_text(attrs["coordinate_transformation_mode"]) == CROP
    nearest = as_text(attrs["mode"]) == "nearest"
    y = x if nearest else x.astype(np.promote_types(compute_dtype(x.dtype), F32), copy=False)
    outside = np.zeros((1,) * x.ndim, dtype=bool)
    compiled = nearest and x.dtype.itemsize in WORDS and not x.dtype.hasobject
    last: dict[int, np.ndarray] = {}  # nearest indices of the last two axes, for the compiled loop
    for dim in range(x.ndim):
        axis = Axis(x.shape[dim], out[dim], F32(factors[dim]), axis_rois[dim])
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
