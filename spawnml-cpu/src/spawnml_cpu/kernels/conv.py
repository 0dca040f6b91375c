"""Convolutions: im2col through a sliding-window view and one GEMM per group (batch folded
into the columns); depthwise convolution as one multiply-add per kernel tap."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from spawnml.backend import KernelContext
from spawnml.ops.shapes import transposed_windows, window_attrs

from .nn_common import Windows, compute_dtype, grouped_matmul, per_channel, widen
from .table import KERNELS


def convolve(attrs: dict, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Grouped N-d cross-correlation of ``x (N, C, *S)`` with ``w (M, C/group, *K)``."""
    group = attrs.get("group", 1)
    kernel = tuple(attrs.get("kernel_shape") or w.shape[2:])
    windows = Windows.of(attrs, x.shape[2:], kernel)
    if group > 1 and w.shape[1] == 1:
        return _depthwise(windows, x, w, group)
    batch, channels = x.shape[:2]
    spatial = len(kernel)
    cols = windows.view(x).reshape(batch, group, channels // group, *windows.out, *kernel)
    # (N, G, C/G, *out, *K) -> (G, C/G, *K, N, *out): the im2col matrix of each group.
    order = (1, 2, *range(3 + spatial, 3 + 2 * spatial), 0, *range(3, 3 + spatial))
    cols = cols.transpose(order).reshape(group, -1, batch * math.prod(windows.out))
    y = grouped_matmul(w.reshape(group, w.shape[0] // group, -1), cols)
    return np.moveaxis(y.reshape(w.shape[0], batch, *windows.out), 1, 0)


def _depthwise(windows: Windows, x: np.ndarray, w: np.ndarray, group: int) -> np.ndarray:
    """Convolution where every group reads one input channel: a multiply-add per tap."""
    batch, multiplier = x.shape[0], w.shape[0] // group
    spread = (1,) * len(windows.out)
    weights = w.reshape(group, multiplier, -1)
    y = np.zeros((batch, group, multiplier, *windows.out), dtype=np.result_type(x, w))
    for index, values in enumerate(windows.each_tap(x)):
        y += values[:, :, None] * weights[:, :, index].reshape(group, multiplier, *spread)
    return y.reshape(batch, group * multiplier, *windows.out)


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
    weights = w.reshape(group, channels // group, -1).transpose(0, 2, 1)
    inputs = np.moveaxis(x.reshape(batch, group, channels // group, -1), 0, 2)
    cols = grouped_matmul(weights, inputs.reshape(group, channels // group, -1))
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


def _float_kernel(
    operation: Callable[[dict, np.ndarray, np.ndarray], np.ndarray],
) -> Callable[..., np.ndarray]:
    """A Conv-style kernel: ``operation`` in the compute type, plus the optional bias."""

    def kernel(ctx: KernelContext, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
        y = operation(ctx.attrs, widen(x), w.astype(compute_dtype(x.dtype), copy=False))
        if b is not None:
            y = y + per_channel(b.astype(y.dtype, copy=False), y.ndim)
        return np.ascontiguousarray(y, dtype=x.dtype)

    return kernel


KERNELS.register("Conv")(_float_kernel(convolve))
KERNELS.register("ConvTranspose")(_float_kernel(deconvolve))
