"""The compiled row loop of :mod:`.integer_product`: 8-bit values widened to int32 as they are read."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def product_rows(
    a: np.ndarray,
    b: np.ndarray,
    a_zeros: np.ndarray,
    b_zeros: np.ndarray,
    out: np.ndarray,
    start: int,
    stop: int,
) -> None:
    """``out[m] = (a[m] - a_zeros[m]) @ (b - b_zeros)`` for rows ``start`` to ``stop``, in int32."""
    for m in range(start, stop):
        row = out[m]
        row[:] = 0
        for k in range(a.shape[1]):
            value = np.int32(a[m, k]) - a_zeros[m]
            if value != 0:
                weights = b[k]
                for n in range(b.shape[1]):
                    row[n] += value * (np.int32(weights[n]) - b_zeros[n])
