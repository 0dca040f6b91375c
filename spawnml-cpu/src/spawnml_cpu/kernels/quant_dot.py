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

import numba
import numpy as np

#: 2**-24 in float32: a subnormal float16's value is its mantissa times this, exactly.
_SUBNORMAL_STEP = np.float32(2.0**-24)


@numba.njit(inline="always")
def _half(low: int, high: int, bits: np.ndarray, as_float: np.ndarray) -> np.float32:
    """The IEEE float16 whose little-endian bytes are ``low, high``, as float32 (exactly): its bits
    are rebuilt as a float32's in ``bits``, which ``as_float`` views."""
    half = np.uint32(low) | (np.uint32(high) << np.uint32(8))
    sign, exponent, mantissa = (
        half >> np.uint32(15),
        (half >> np.uint32(10)) & np.uint32(0x1F),
        half & np.uint32(0x3FF),
    )
    if exponent == 0:
        value = np.float32(mantissa) * _SUBNORMAL_STEP
        return -value if sign else value
    widened = np.uint32(255) if exponent == 31 else exponent + np.uint32(112)  # rebias 15 -> 127
    bits[0] = (sign << np.uint32(31)) | (widened << np.uint32(23)) | (mantissa << np.uint32(13))
    return as_float[0]


@numba.njit(inline="always")
def _decode(
    kind: int, w: np.ndarray, at: int, values: np.ndarray, bits: np.ndarray, as_float: np.ndarray
) -> None:
    """The 32 values ``d * q + m`` of the block at byte ``at`` of the weight row ``w``, into ``values``.

    ``kind`` is 0 for Q4_0, 1 Q4_1, 2 Q5_0, 3 Q5_1, 4 Q8_0 (the order of
    ``quant_gguf.DECODED_IN_PASS``). The types without a minimum take their offset (8, 16) off
    ``q`` in integers, as ggml does, and ``m`` is 0.
    """
    d, m = _half(w[at], w[at + 1], bits, as_float), np.float32(0)
    if kind == 4:  # Q8_0: d, then 32 int8
        for j in range(32):
            byte = np.int32(w[at + 2 + j])
            values[j] = d * np.float32(byte - 256 if byte > 127 else byte)
        return
    if kind == 1 or kind == 3:  # d, m, ...
        m = _half(w[at + 2], w[at + 3], bits, as_float)
    fifth = at + (4 if kind == 3 else 2)  # Q5: the 32 fifth bits, a little-endian uint32
    nibbles = fifth + 4 if kind >= 2 else at + (2 if kind == 0 else 4)
    offset = 8 if kind == 0 else (16 if kind == 2 else 0)
    for j in range(16):
        byte = np.int32(w[nibbles + j])
        low, high = byte & 0x0F, byte >> 4
        if kind >= 2:
            low |= ((np.int32(w[fifth + j // 8]) >> (j % 8)) & 1) << 4
            high |= ((np.int32(w[fifth + 2 + j // 8]) >> (j % 8)) & 1) << 4
        values[j] = d * np.float32(low - offset) + m
        values[j + 16] = d * np.float32(high - offset) + m


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
    values = np.empty(32, np.float32)
    sums = np.empty(rows_x, np.float32)
    bits = np.empty(1, np.uint32)
    as_float = bits.view(np.float32)
    for r in range(first, last):
        sums[:] = 0
        row = w[r]
        for b in range(blocks):
            _decode(kind, row, b * block_bytes, values, bits, as_float)
            base = b * 32
            for i in range(rows_x):
                total = np.float32(0)
                for j in range(32):
                    total += values[j] * x[i, base + j]
                sums[i] += total
        for i in range(rows_x):
            out[i, r] = sums[i]
