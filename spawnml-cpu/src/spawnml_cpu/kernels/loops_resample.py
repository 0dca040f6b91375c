"""Loops compiled with numba for upsampling: nearest Resize over the last two axes, and the
taps of transposed convolutions whose kernel equals their stride.

Imported on first use (numba takes a while to import); compiled once per element type and
cached next to this file. Both loops write every output element once, row by row, so that
the output is not walked again by numpy's strided copies or additions.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

_JIT: dict[str, Any] = {"nogil": True, "cache": True}


@numba.njit(**_JIT)
def nearest2d(x: np.ndarray, rows: np.ndarray, columns: np.ndarray, out: np.ndarray) -> None:
    """``out[p, i, j] = x[p, rows[i], columns[j]]`` for ``x (P, H, W)`` and ``out (P, OH, OW)``.

    Output rows that read the same input row as the row before are copied from it.
    """
    planes, height = out.shape[:2]
    width = columns.shape[0]
    for p in range(planes):
        i = 0
        while i < height:
            source, target = x[p, rows[i]], out[p, i]
            for j in range(width):
                target[j] = source[columns[j]]
            i += 1
            while i < height and rows[i] == rows[i - 1]:
                out[p, i] = target
                i += 1


@numba.njit(**_JIT)
def place_taps2d(sums: np.ndarray, bias: np.ndarray, first: int, y: np.ndarray) -> None:
    """``y[m, (first + r) * KH + u, c * KW + v] = sums[m, u, v, r, c] + bias[m]``.

    ``sums (M, KH, KW, R, W)`` holds every tap's contribution for ``R`` input rows from
    ``first``; with the stride equal to the kernel, each output pixel takes exactly one tap.
    """
    channels, kernel_h, kernel_w, rows, width = sums.shape
    for m in range(channels):
        shift = bias[m]
        for r in range(rows):
            for u in range(kernel_h):
                target = y[m, (first + r) * kernel_h + u]
                for v in range(kernel_w):
                    source = sums[m, u, v, r]
                    for c in range(width):
                        target[c * kernel_w + v] = source[c] + shift
