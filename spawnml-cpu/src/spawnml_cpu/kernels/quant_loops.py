"""The compiled loop of :mod:`.quant`: float32 values quantized to 8 bits in one pass."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def quantize(
    x: np.ndarray, scale: np.float32, zero: np.float32, low: np.float32, high: np.float32, out: np.ndarray
) -> None:
    """``out = clip(rint(x / scale) + zero, low, high)`` over flat arrays, in float32 as
    QuantizeLinear computes it (a division, rounded half to even); NaN gives 0, as numpy's cast."""
    for index in range(x.size):
        value = np.rint(x[index] / scale) + zero
        if value != value:
            value = np.float32(0)
        out[index] = min(max(value, low), high)
