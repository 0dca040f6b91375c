"""Pooling: reductions over sliding-window views, and the global pools.

1-D and 2-D float MaxPool runs on compiled loops that read the input in place. Without its
indices output, :func:`_max_pool_2d` leaves taps in the padding out and takes the maximum over a
window's rows and then its columns (KH + KW passes where a pass over a padded copy per tap is
KH * KW); with them (what training's gradient reads), :func:`_max_pool_indices_2d` compares each
window's taps in order. Large ones are cut into spans of planes over the threads, as depthwise
convolutions are (the same work: outputs times taps).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from spawnml.backend import KernelContext

from .nn_common import Windows, matmul, widen
from .table import KERNELS
from .threads import MIN_SPLIT_DEPTHWISE, part_count, run_spans, thread_count

#: Element types the compiled MaxPool takes.
_COMPILED = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


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


def _max_pool_2d(
    x: np.ndarray,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
    begins: tuple[int, int],
    lowest: float,
    planes: tuple[int, int],
    y: np.ndarray,
) -> None:
    """``y (P, OH, OW)`` = the maximum over each window of ``x (P, H, W)``, for planes
    ``planes[0]`` to ``planes[1]``; ``lowest`` where a window lies wholly in the padding. NaN
    wins, as with ``np.maximum``. Compiled by numba on first use (:func:`_compiled`).

    A maximum is separable: each output row takes the maximum of its window's input rows over
    every column (contiguous runs, which vectorize), then of that row's columns in each window,
    KH + KW passes where taking every tap would be KH * KW. Taps in the padding are left out."""
    height, width = x.shape[1], x.shape[2]
    rows, columns = y.shape[1], y.shape[2]
    starts, stops = np.empty(kernel[1], np.int64), np.empty(kernel[1], np.int64)
    for j in range(kernel[1]):  # the output columns whose tap j lies inside the input
        shift = j * dilations[1] - begins[1]
        starts[j] = min(max(0, -(shift // strides[1])), columns)  # ceil(-shift / stride), at least 0
        stops[j] = max(starts[j], min(columns, (width - 1 - shift) // strides[1] + 1))
    across = np.empty(width, y.dtype)
    for p in range(planes[0], planes[1]):
        for oy in range(rows):
            across[:] = lowest
            for i in range(kernel[0]):
                row = oy * strides[0] - begins[0] + i * dilations[0]
                if 0 <= row < height:
                    source = x[p, row]
                    for c in range(width):
                        value, best = source[c], across[c]
                        across[c] = value if value > best or value != value else best
            target = y[p, oy]
            target[:] = lowest
            for j in range(kernel[1]):
                shift = j * dilations[1] - begins[1]
                for ox in range(starts[j], stops[j]):
                    value, best = across[ox * strides[1] + shift], target[ox]
                    target[ox] = value if value > best or value != value else best


def _max_pool_indices_2d(
    x: np.ndarray,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
    begins: tuple[int, int],
    lowest: float,
    column_major: bool,
    planes: tuple[int, int],
    y: np.ndarray,
    indices: np.ndarray,
) -> None:
    """``y (P, OH, OW)`` = the maximum over each window of ``x (P, H, W)`` and ``indices`` where it
    lies in the flattened input (spatial axes column-major if asked), for planes ``planes[0]`` to
    ``planes[1]``. Taps are read in row-major order, those in the padding as ``lowest``; the first
    tap reaching the maximum is the one named, and a NaN counts only as the first tap (as the
    taps' comparisons ``value > best`` of the uncompiled path)."""
    height, width = x.shape[1], x.shape[2]
    rows, columns = y.shape[1], y.shape[2]
    for p in range(planes[0], planes[1]):
        base = p * height * width
        for oy in range(rows):
            top = oy * strides[0] - begins[0]
            for ox in range(columns):
                left = ox * strides[1] - begins[1]
                best, best_row, best_column = lowest, top, left
                for i in range(kernel[0]):
                    row = top + i * dilations[0]
                    for j in range(kernel[1]):
                        column = left + j * dilations[1]
                        inside = 0 <= row < height and 0 <= column < width
                        value = x[p, row, column] if inside else lowest
                        if (i == 0 and j == 0) or value > best:
                            best, best_row, best_column = value, row, column
                y[p, oy, ox] = best
                offset = best_row + best_column * height if column_major else best_row * width + best_column
                indices[p, oy, ox] = base + offset


@functools.cache
def _compiled(with_indices: bool) -> Callable[..., None]:
    """The compiled MaxPool loop, with or without indices (numba is imported on first use: it takes
    a while)."""
    import numba

    return numba.njit(nogil=True, cache=True)(_max_pool_indices_2d if with_indices else _max_pool_2d)


def _max_pool_compiled(
    windows: Windows, x: np.ndarray, column_major: bool | None
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """MaxPool of a 1-D or 2-D ``x`` on the compiled loop, 1-D as 2-D over a height of one; with the
    maxima's flat indices too unless ``column_major`` (their order of the spatial axes) is None."""
    if x.ndim == 3:
        lifted = Windows(
            (1, *windows.kernel),
            (1, *windows.strides),
            (1, *windows.dilations),
            (0, *windows.begins),
            (0, *windows.ends),
            (1, *windows.out),
        )
        pooled = _max_pool_compiled(lifted, x[:, :, None], column_major)
        if isinstance(pooled, tuple):
            return pooled[0][:, :, 0], pooled[1][:, :, 0]
        return pooled[:, :, 0]
    batch, channels = x.shape[:2]
    y = np.empty((batch, channels, *windows.out), x.dtype)
    indices = np.empty(y.shape, np.int64) if column_major is not None else None
    count = batch * channels
    if y.size == 0:
        return y if indices is None else (y, indices)
    planes = np.ascontiguousarray(x).reshape(count, *x.shape[2:])
    out = y.reshape(count, *windows.out)
    geometry = (windows.kernel, windows.strides, windows.dilations, windows.begins, _lowest(x.dtype))
    loop = _compiled(indices is not None)

    def run(span: slice) -> None:
        if indices is None:
            loop(planes, *geometry, (span.start, span.stop), out)
        else:
            loop(planes, *geometry, column_major, (span.start, span.stop), out, indices.reshape(out.shape))

    threads = thread_count()
    work = y.size * math.prod(windows.kernel)
    run_spans(run, count, part_count(work, count, threads, MIN_SPLIT_DEPTHWISE), threads)
    return y if indices is None else (y, indices)


@KERNELS.register("MaxPool")
def _max_pool(ctx: KernelContext, x: np.ndarray) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    windows = _windows(ctx, x)
    column_major = bool(ctx.attrs.get("storage_order", 0))
    if x.ndim in (3, 4) and x.dtype in _COMPILED:
        return _max_pool_compiled(windows, x, column_major if _wants(ctx, 1) else None)
    taps = windows.each_tap(x, _lowest(x.dtype))
    if not _wants(ctx, 1):
        return _reduce_taps(taps, np.maximum)
    y, best = _argmax_taps(taps)
    return y, _flat_indices(windows, best, x.shape, column_major)


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
