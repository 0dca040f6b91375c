"""The compiled loop of :mod:`.integer_product`: dot products of int16 rows, summed in int32."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def dot_rows(values: np.ndarray, rows: np.ndarray, out: np.ndarray, start: int, stop: int) -> None:
    """``out[m, n] = values[m] . rows[n]`` for ``n`` from ``start`` to ``stop``, in int32.

    Each row of ``rows`` is read once for every row of ``values``; the inner loop is a plain
    int16 dot product, which LLVM vectorizes with pmaddwd (multiply pairs, add into int32).
    """
    for n in range(start, stop):
        row = rows[n]
        for m in range(values.shape[0]):
            line = values[m]
            total = np.int32(0)
            for k in range(values.shape[1]):
                total += np.int32(line[k]) * np.int32(row[k])
            out[m, n] = total
