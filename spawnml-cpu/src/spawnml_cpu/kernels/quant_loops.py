"""The compiled loops of :mod:`.quant`: float32 values quantized to 8 bits, and their ranges,
each in one pass over every row."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def quantize_rows(
    x: np.ndarray, scales: np.ndarray, zeros: np.ndarray, low: np.float32, high: np.float32, out: np.ndarray
) -> None:
    """``out[r] = clip(rint(x[r] / scales[r]) + zeros[r], low, high)`` for each row ``r`` of the
    2-D ``x``, in float32 as QuantizeLinear computes it (a division, rounded half to even); NaN
    gives 0, as numpy's cast does."""
    for row in range(x.shape[0]):
        scale, zero = scales[row], zeros[row]
        for index in range(x.shape[1]):
            value = np.rint(x[row, index] / scale) + zero
            if value != value:
                value = np.float32(0)
            out[row, index] = min(max(value, low), high)


@numba.njit(cache=True, nogil=True)
def row_ranges(x: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> None:
    """Each row's least and greatest value, widened to hold 0; a row holding NaN gets 0 and 0
    (numpy's ``min`` gives NaN there, and ``fmin(NaN, 0)`` 0)."""
    for row in range(x.shape[0]):
        low, high, nan = np.float32(0), np.float32(0), False
        for index in range(x.shape[1]):
            value = x[row, index]
            nan |= value != value
            low = min(low, value)
            high = max(high, value)
        lows[row], highs[row] = (np.float32(0), np.float32(0)) if nan else (low, high)
