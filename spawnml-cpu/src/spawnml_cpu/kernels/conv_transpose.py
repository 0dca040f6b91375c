"""Transposed convolutions: one GEMM per group for every tap's contribution, then col2im."""

from __future__ import annotations

import math

import numpy as np
from spawnml.backend import KernelContext
from spawnml.ops.shapes import transposed_windows, window_attrs

from .nn_common import compute_dtype, grouped_matmul, per_channel, widen
from .table import KERNELS


def deconvolve(attrs: dict, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Grouped transposed convolution of ``x (N, C, *S)`` with ``w (C, M/group, *K)``.

    One GEMM per group gives every tap's contribution; col2im adds them by strided
    slices, one slice per kernel tap, then the padding is cropped.
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
    cols = grouped_matmul(weights, inputs.reshape(group, channels // group, batch * points))
    cols = cols.reshape(out_channels, *kernel, batch, *sizes)
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


@KERNELS.register("ConvTranspose")
def _conv_transpose(
    ctx: KernelContext, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
) -> np.ndarray:
    y = deconvolve(ctx.attrs, widen(x), w.astype(compute_dtype(x.dtype), copy=False))
    if b is not None:
        y = y + per_channel(b.astype(y.dtype, copy=False), y.ndim)
    return np.ascontiguousarray(y, dtype=x.dtype)
