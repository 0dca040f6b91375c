"""A loop compiled with numba for transposed convolutions (the input gradients of training):
col2im of the products of a whole batch, each kernel tap's added at its places.

Imported on first use (numba takes a while to import); compiled once per element type and
cached next to this file. It walks short rows (a few pixels) that numpy's strided additions
would each take a call for.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

_JIT: dict[str, Any] = {"nogil": True, "cache": True}


@numba.njit(**_JIT)
def _inside(count: int, stride: int, offset: int, size: int) -> tuple[int, int]:
    """The range of ``k`` in ``[0, count)`` for which ``k * stride + offset`` lies in ``[0, size)``."""
    low = 0 if offset >= 0 else (-offset + stride - 1) // stride
    high = 0 if size - offset <= 0 else (size - offset - 1) // stride + 1
    return min(low, count), max(min(high, count), min(low, count))


@numba.njit(**_JIT)
def scatter_patches2d(
    cols: np.ndarray,
    strides: tuple[int, int],
    dilations: tuple[int, int],
    begins: tuple[int, int],
    y: np.ndarray,
) -> None:
    """``y (N, M, OH, OW)``: each tap's products of ``cols (M, KH, KW, N, H, W)`` (a transposed
    convolution's, pixel ``(h, w)`` reaching ``(h * stride + tap * dilation - begin)``) summed at
    their places, tap after tap from zero; places outside ``y`` are cropped."""
    out_channels, kernel_h, kernel_w, batch, height, width = cols.shape
    out_h, out_w = y.shape[2:]
    y[:] = 0
    for m in range(out_channels):  # cols read in their order
        for i in range(kernel_h):
            top = i * dilations[0] - begins[0]
            rows = _inside(height, strides[0], top, out_h)
            for j in range(kernel_w):
                left = j * dilations[1] - begins[1]
                low, high = _inside(width, strides[1], left, out_w)
                for n in range(batch):
                    for h in range(rows[0], rows[1]):
                        oy = h * strides[0] + top
                        for w in range(low, high):
                            y[n, m, oy, w * strides[1] + left] += cols[m, i, j, n, h, w]
