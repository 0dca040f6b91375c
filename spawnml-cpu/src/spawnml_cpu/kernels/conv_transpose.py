"""Transposed convolutions: one GEMM per group for every tap's contribution, then col2im.

Where the kernel equals the stride and nothing is padded (the taps tile the output, as in 2x2
stride-2 upsampling layers), the GEMMs run over tiles of input rows whose sums stay in cache,
and a compiled loop places each tile's taps, plus the bias, straight into the output.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from spawnml.backend import KernelContext
from spawnml.ops.shapes import transposed_windows, window_attrs

from .nn_common import compute_dtype, grouped_matmul, per_channel, widen
from .table import KERNELS
from .threads import blas_for, one_blas_thread

#: Bytes of tap sums one GEMM of the tiling path writes, about one core's L2 cache. On PP-OCRv4
#: det's layers, 256 KiB made the 24 -> 24 channel one about 15% slower (more, smaller GEMMs) and
#: 2 MiB the 24 -> 1 channel one about 15% slower (sums out of cache).
_TILE = 1 << 20
#: Element types the compiled col2im takes.
_COMPILED = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def deconvolve(attrs: dict, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Grouped transposed convolution of ``x (N, C, *S)`` with ``w (C, M/group, *K)``.

    One GEMM per group over the whole batch gives every tap's contribution; col2im adds them,
    one tap after another, and crops the padding: a compiled loop for float 1-D and 2-D ones,
    strided slices (one per tap) for the others.
    """
    group = attrs.get("group", 1)
    kernel = tuple(attrs.get("kernel_shape") or w.shape[2:])
    strides, dilations, _ = window_attrs(attrs, kernel)
    axes = transposed_windows(x.shape[2:], attrs, kernel)
    batch, channels, *sizes = x.shape
    out_channels = w.shape[1] * group
    points = math.prod(sizes)  # sizes spelled out: -1 cannot be inferred for an empty batch
    weights = w.reshape(group, channels // group, -1).transpose(0, 2, 1)
    inputs = np.moveaxis(x.reshape(batch, group, channels // group, points), 0, 2)
    with blas_for(weights.size * batch * points):
        cols = grouped_matmul(weights, inputs.reshape(group, channels // group, batch * points))
    cols = cols.reshape(out_channels, *kernel, batch, *sizes)
    if len(kernel) in (1, 2) and cols.dtype in _COMPILED:
        return _scatter_compiled(cols, strides, dilations, axes)
    full = [
        max((size - 1) * s + (k - 1) * d + 1, begin + out)
        for size, s, k, d, (out, begin, _) in zip(sizes, strides, kernel, dilations, axes, strict=True)
    ]
    y = np.zeros((out_channels, batch, *full), dtype=cols.dtype)
    for tap in np.ndindex(*kernel):
        target = tuple(
            slice(t * d, t * d + (size - 1) * s + 1, s)
            for t, d, size, s in zip(tap, dilations, sizes, strides, strict=True)
        )
        y[(slice(None), slice(None), *target)] += cols[(slice(None), *tap)]
    crop = tuple(slice(begin, begin + out) for out, begin, _ in axes)
    return np.moveaxis(y[(slice(None), slice(None), *crop)], 1, 0)


def _scatter_compiled(
    cols: np.ndarray, strides: Sequence[int], dilations: Sequence[int], axes: Sequence[tuple[int, ...]]
) -> np.ndarray:
    """col2im of the taps' products ``cols (M, *K, N, *S)`` of a 1-D or 2-D transposed
    convolution into its ``(N, M, *out)`` output, on :func:`.loops_patches.scatter_patches2d`
    (1-D lifted to 2-D). The sums are those of the strided slices, in the same order."""
    from . import loops_patches

    if cols.ndim == 4:  # (M, K, N, S): a height of one
        lifted = cols.reshape(cols.shape[0], 1, cols.shape[1], cols.shape[2], 1, cols.shape[3])
        y = _scatter_compiled(lifted, (1, *strides), (1, *dilations), [(1, 0, 0), *axes])
        return y[:, :, 0]
    out = tuple(size for size, _, _ in axes)
    begins = tuple(begin for _, begin, _ in axes)
    y = np.empty((cols.shape[3], cols.shape[0], *out), dtype=cols.dtype)
    loops_patches.scatter_patches2d(cols, tuple(strides), tuple(dilations), begins, y)
    return y


def taps_tile(attrs: dict, sizes: tuple[int, ...], kernel: tuple[int, ...]) -> bool:
    """Whether every output pixel of a 1-D or 2-D transposed convolution takes exactly one tap:
    the kernel equals the stride, without dilation, padding or cropping."""
    strides, dilations, _ = window_attrs(attrs, kernel)
    axes = transposed_windows(sizes, attrs, kernel)
    return (
        len(kernel) in (1, 2)
        and tuple(strides) == kernel
        and all(d == 1 for d in dilations)
        and all(
            out == size * k and begin == 0
            for size, k, (out, begin, _) in zip(sizes, kernel, axes, strict=True)
        )
    )


def deconvolve_tiling(x: np.ndarray, w: np.ndarray, bias: np.ndarray, group: int) -> np.ndarray:
    """:func:`deconvolve` plus ``bias`` where :func:`taps_tile` holds, 1-D lifted to 2-D: GEMMs over
    tiles of input rows on one BLAS thread, each tile's taps placed by a compiled loop."""
    from . import loops_resample

    if x.ndim == 3:
        return deconvolve_tiling(x[:, :, None], w[:, :, None], bias, group)[:, :, 0]
    batch, channels, height, width = x.shape
    kernel_h, kernel_w = w.shape[2:]
    out_channels = w.shape[1] * group
    y = np.empty((batch, out_channels, height * kernel_h, width * kernel_w), dtype=x.dtype)
    weights = w.reshape(group, channels // group, -1).transpose(0, 2, 1)
    taps = weights.shape[1]
    step = max(1, min(height, _TILE // max(1, group * taps * width * x.itemsize)))
    scratch = np.empty(group * taps * step * width, dtype=x.dtype)
    with one_blas_thread():  # few rows (output channels and taps): BLAS's threads cost more than they gain
        for n in range(batch):
            planes = x[n].reshape(group, channels // group, height * width)
            for first in range(0, height, step):
                count = min(step, height - first)
                sums = scratch[: group * taps * count * width].reshape(group, taps, count * width)
                grouped_matmul(weights, planes[:, :, first * width : (first + count) * width], sums)
                tile = sums.reshape(out_channels, kernel_h, kernel_w, count, width)
                loops_resample.place_taps2d(tile, bias, first, y[n])
    return y


@KERNELS.register("ConvTranspose")
def _conv_transpose(
    ctx: KernelContext, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
) -> np.ndarray:
    work = compute_dtype(x.dtype)
    inputs, weights = widen(np.ascontiguousarray(x)), w.astype(work, copy=False)
    kernel = tuple(w.shape[2:])
    if x.size and w.size and taps_tile(ctx.attrs, x.shape[2:], kernel):
        group = ctx.attrs.get("group", 1)
        bias = np.zeros(w.shape[1] * group, work) if b is None else b.astype(work, copy=False)
        return deconvolve_tiling(inputs, weights, bias, group).astype(x.dtype, copy=False)
    y = deconvolve(ctx.attrs, inputs, weights)
    if b is not None:
        y = y + per_channel(b.astype(y.dtype, copy=False), y.ndim)
    return np.ascontiguousarray(y, dtype=x.dtype)
