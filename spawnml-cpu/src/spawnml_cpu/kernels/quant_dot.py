"""GGUF weights of 32-element blocks times a few rows of activations, decoded and summed in one
pass: the float32 weights are never written out.

A decode step multiplies one row by every weight, so it is bound by the weights' bytes:
reading 4.5 to 8.5 bits per weight once beats dequantizing to 32 bits and reading those
again. Each element is decoded with ggml's float32 operations (``d * q + m``, ``d * (q - 8)``,
...), so the values are those of :mod:`.quant_gguf`; only the sum runs in another order.

Imported on first use (numba takes a while to import); compiled once and cached next to
this file. The loop runs without the GIL, over a range of weight rows, so that
:mod:`.threads` can give ranges to several threads.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(inline="always")
def _half(low: int, high: int) -> np.float32:
    """The IEEE float16 whose little-endian bytes are ``low, high``, as float32 (exactly)."""
    bits = low | (high << 8)
    exponent, mantissa = (bits >> 10) & 0x1F, bits & 0x3FF
    if exponent == 0:
        magnitude = math.ldexp(mantissa, -24)
    elif exponent == 31:
        magnitude = np.inf if mantissa == 0 else np.nan
    else:
        magnitude = math.ldexp(1024 + mantissa, exponent - 25)
    return np.float32(-magnitude if bits & 0x8000 else magnitude)


@numba.njit(inline="always")
def _quants(kind: int, w: np.ndarray, at: int, q: np.ndarray) -> tuple[np.float32, np.float32]:
    """The 32 integers of the block at byte ``at`` of the weight row ``w``, written to ``q``, and its
    scale ``d`` and minimum ``m`` (0 for the types without one): the values are ``d * q + m``.

    ``kind`` is 0 for Q4_0, 1 Q4_1, 2 Q5_0, 3 Q5_1, 4 Q8_0 (the order of
    ``quant_gguf.DECODED_IN_PASS``). The ``_0`` types' offsets (8, 16) are taken off ``q`` as ggml
    does, in integers.
    """
    d, m = _half(w[at], w[at + 1]), np.float32(0)
    if kind == 4:  # Q8_0: d, then 32 int8
        for j in range(32):
            byte = np.int32(w[at + 2 + j])
            q[j] = byte - 256 if byte > 127 else byte
        return d, m
    if kind == 1 or kind == 3:  # d, m, ...
        m = _half(w[at + 2], w[at + 3])
    fifth = at + (4 if kind == 3 else 2)  # Q5: the 32 fifth bits, a little-endian uint32
    nibbles = fifth + 4 if kind >= 2 else at + (2 if kind == 0 else 4)
    offset = 8 if kind == 0 else (16 if kind == 2 else 0)
    for j in range(16):
        byte = np.int32(w[nibbles + j])
        q[j], q[j + 16] = (byte & 0x0F) - offset, (byte >> 4) - offset
    if kind >= 2:
        for j in range(32):
            q[j] += ((np.int32(w[fifth + j // 8]) >> (j % 8)) & 1) << 4
    return d, m


# Sums may be reassociated (so that they vectorize); products and the decoding are not contracted
# into fused multiply-adds, so each weight is exactly ggml's ``d * q + m``.
@numba.njit(nogil=True, cache=True, fastmath={"reassoc", "nsz"})
def rows_times_blocks(
    kind: int, block_bytes: int, x: np.ndarray, w: np.ndarray, out: np.ndarray, first: int, last: int
) -> None:
    """``out[:, r] = x @ decode(w[r])`` for the weight rows ``first <= r < last``.

    ``x`` is float32 ``[m, cols]``, ``w`` the raw blocks ``uint8 [rows, cols / 32 * block_bytes]``
    and ``out`` float32 ``[m, rows]``.
    """
    rows_x, blocks = x.shape[0], w.shape[1] // block_bytes
    q = np.empty(32, np.int32)
    values = np.empty(32, np.float32)
    sums = np.empty(rows_x, np.float32)
    for r in range(first, last):
        sums[:] = 0
        row = w[r]
        for b in range(blocks):
            d, m = _quants(kind, row, b * block_bytes, q)
            for j in range(32):
                values[j] = d * np.float32(q[j]) + m
            base = b * 32
            for i in range(rows_x):
                total = np.float32(0)
                for j in range(32):
                    total += values[j] * x[i, base + j]
                sums[i] += total
        for i in range(rows_x):
            out[i, r] = sums[i]
