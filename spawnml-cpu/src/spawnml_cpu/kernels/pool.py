"""Pooling: reductions over sliding-window views, and the global pools."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
from spawnml.backend import KernelContext

from .nn_common import Windows, matmul, widen
from .table import KERNELS


def _windows(ctx: KernelContext, x: np.ndarray) -> Windows:
    return Windows.of(ctx.attrs, x.shape[2:], ctx.attrs["kernel_shape"])


def _lowest(dtype: np.dtype) -> float | int:
    return np.iinfo(dtype).min if np.issubdtype(dtype, np.integer) else -np.inf


def _wants(ctx: KernelContext, index: int) -> bool:
    outputs = ctx.node.outputs
    return index < len(outputs) and bool(outputs[index])


def _reduce_taps(taps: Iterator[np.ndarray], combine: np.ufunc) -> np.ndarray:
    """``combine`` (``np.add``, ``np.maximum``) of the values of every kernel tap."""
    result = next(taps).copy()
    for values in taps:
        combine(result, values, out=result)
    return result


def _argmax_taps(taps: Iterator[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The maximum over the kernel taps and the first tap that reaches it."""
    result = next(taps).copy()
    best = np.zeros(result.shape, dtype=np.int64)
    for index, values in enumerate(taps, start=1):
        larger = values > result
        np.copyto(result, values, where=larger)
        best[larger] = index
    return result, best


def _flat_indices(windows: Windows, best: np.ndarray, shape: Sequence[int], column_major: bool) -> np.ndarray:
    """Where each maximum lies in the flattened input (spatial axes column-major if asked)."""
    sizes = shape[2:]
    taps = np.unravel_index(best, windows.kernel)
    index = np.arange(math.prod(shape[:2]), dtype=np.int64).reshape(*shape[:2], *(1,) * len(sizes))
    index = index * math.prod(sizes)
    for axis in range(len(sizes)):
        step = math.prod(sizes[:axis]) if column_major else math.prod(sizes[axis + 1 :])
        starts = windows.starts(axis).reshape(-1, *(1,) * (len(sizes) - axis - 1))
        index = index + (starts + taps[axis] * windows.dilations[axis]) * step
    return index


@KERNELS.register("MaxPool")
def _max_pool(ctx: KernelContext, x: np.ndarray) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    windows = _windows(ctx, x)
    taps = windows.each_tap(x, _lowest(x.dtype))
    if not _wants(ctx, 1):
        return _reduce_taps(taps, np.maximum)
    y, best = _argmax_taps(taps)
    return y, _flat_indices(windows, best, x.shape, bool(ctx.attrs.get("storage_order", 0)))


def _tap_counts(windows: Windows, sizes: Sequence[int], include_pad: bool) -> np.ndarray:
    """How many taps of each window fall inside the input (and its pads, if included)."""
    counts = np.ones((), dtype=np.int64)
    for axis, size in enumerate(sizes):
        low, high = (-windows.begins[axis], size + windows.ends[axis]) if include_pad else (0, size)
        taps = windows.taps(axis)
        counts = counts[..., None] * ((taps >= low) & (taps < high)).sum(axis=1)
    return counts


@KERNELS.register("AveragePool")
def _average_pool(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    windows, work = _windows(ctx, x), widen(x)
    sums = _reduce_taps(windows.each_tap(work), np.add)
    counts = _tap_counts(windows, x.shape[2:], bool(ctx.attrs.get("count_include_pad", 0)))
    return (sums / counts.astype(work.dtype)).astype(x.dtype, copy=False)


@KERNELS.register("LpPool", since=2)
def _lp_pool(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    p = ctx.attrs["p"]
    sums = _reduce_taps(_windows(ctx, x).each_tap(np.abs(widen(x)) ** p), np.add)
    return (sums ** (1 / p)).astype(x.dtype, copy=False)


@KERNELS.register("GlobalAveragePool")
def _global_average_pool(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    """Every plane's sum as one matrix-vector product with ones, then divided by its size.

    numpy's mean over the trailing axes reduces each plane on its own, which costs far more than
    the sums on small planes (MobileNetV2's 1280 planes of 7x7: 75-95 us, against about 10)."""
    work = widen(x)
    size = math.prod(x.shape[2:])
    planes = np.ascontiguousarray(work).reshape(math.prod(x.shape[:2]), size)
    means = matmul(planes, np.ones(size, work.dtype)) / work.dtype.type(size)
    return means.reshape(*x.shape[:2], *(1,) * (x.ndim - 2)).astype(x.dtype, copy=False)


@KERNELS.register("GlobalMaxPool")
def _global_max_pool(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return x.max(axis=tuple(range(2, x.ndim)), keepdims=True)
