"""The compiled loops of GGUF products on repacked weights (:mod:`.quant_gguf_pack`).

``out[i, r] = sum over sub-blocks s of scale[r, s] * (sum_j q[r, s, j] * x[i, s, j] - offset *
sum_j x[i, s, j]) + low[r, s] * sum_j x[i, s, j]``: each weight is ggml's ``scale * (q - offset)
+ low``, factored so that the inner loop multiplies small integers (converted to float32) by the
float32 activations, 32 at a time, and sums them in a vector register. Activations stay float32: with
int8 activations per block, as ggml has them, the same loop ran slower (the compiler emits no
8-bit dot products for it), and float32 ones keep the products closer to the float32 model's.

How the loops are written decides whether LLVM vectorizes them; each of these ran on scalars,
an order of magnitude slower: an inner loop of a constant count (LLVM unrolls it whole before
its loop vectorizer sees it, and numba runs no straight-line vectorizer), so the count is an
argument (``span``, :data:`.quant_gguf_pack.SPAN`); an index that may be negative (numba wraps
those around), so the loops run over views of their row range from row 0; a range of a step not
known at compile time; a sum under a condition per element, so 16-element sub-blocks are summed
apart by a 0/1 mask; the fifth-bit decoding left in the loop of the 4-bit types. And the
integer decoding is kept in int32 (a Python int constant widens it to int64: half the lanes).
The two sub-blocks of a nibble pair are summed by a loop each, with one sum, and the offset is
taken out after, as ``offset * sum_j x``: one loop with both sums and the offset in it ran two
to four times slower (a 3072 x 576 product on one thread: Q4_1 1.2 against 0.34 ms, Q5_1 1.6
against 0.77 ms; Q8_0 takes 0.2 ms).

Imported on first use (numba takes a while to import); compiled once and cached next to this
file. The loops run without the GIL over a range of weight rows, so that :mod:`.threads` can give
ranges to several threads. Sums may be reassociated and contracted into fused multiply-adds.
"""

from __future__ import annotations

import numba
import numpy as np

_FAST = {"reassoc", "contract", "nsz"}


@numba.njit(inline="always")
def _lows(low: np.ndarray, xsum: np.ndarray, subs: int, r: int, i: int) -> np.float32:
    """``sum_s low[r, s] * xsum[i, s]``: the minimums' part of a row's product."""
    total = np.float32(0)
    for s in range(subs if low.size else 0):
        total += low[r * subs + s] * xsum[i * subs + s]
    return total


@numba.njit(inline="always")
def _nibble_sum(quants: np.ndarray, shift: int, at: int, x: np.ndarray, xa: int, span: int) -> np.float32:
    """The sum of the nibbles at bit ``shift`` (0 or 4) of ``span`` bytes times their activations
    (unsigned: the offset is taken out through the activations' sum)."""
    total = np.float32(0)
    low_bits, by = np.int32(15), np.int32(shift)
    for k in range(span):
        total += np.float32((np.int32(quants[at + k]) >> by) & low_bits) * x[xa + k]
    return total


@numba.njit(inline="always")
def _fifth_sum(
    quants: np.ndarray, shift: int, high: np.uint32, at: int, x: np.ndarray, xa: int, span: int
) -> np.float32:
    """:func:`_nibble_sum` with the fifth bits ``high`` of the sub-block (bit ``k`` for element ``k``)."""
    total = np.float32(0)
    low_bits, by, four, one = np.int32(15), np.int32(shift), np.int32(4), np.uint32(1)
    for k in range(span):
        fifth = np.int32((high >> np.uint32(k)) & one) << four
        total += np.float32(((np.int32(quants[at + k]) >> by) & low_bits) | fifth) * x[xa + k]
    return total


@numba.njit(inline="always")
def _byte_sum(quants: np.ndarray, at: int, x: np.ndarray, xa: int, span: int) -> np.float32:
    """The sum of ``span`` int8 quants times their activations."""
    whole = np.float32(0)
    for k in range(span):
        whole += np.float32(quants[at + k]) * x[xa + k]
    return whole


@numba.njit(inline="always")
def _byte_sums(
    quants: np.ndarray, first_part: np.ndarray, at: int, x: np.ndarray, xa: int, span: int
) -> tuple[np.float32, np.float32]:
    """:func:`_byte_sum`, and the same sum over the elements where ``first_part`` is 1."""
    whole, part = np.float32(0), np.float32(0)
    for k in range(span):
        product = np.float32(quants[at + k]) * x[xa + k]
        whole += product
        part += product * first_part[k]
    return whole, part


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def nibble_product(
    quants: np.ndarray,
    span: int,
    high: np.ndarray,
    offset: int,
    scale: np.ndarray,
    low: np.ndarray,
    x: np.ndarray,
    xsum: np.ndarray,
    out: np.ndarray,
    first: int,
    last: int,
) -> None:
    """``out[:, first:last] = x @ W[first:last]^T`` for a nibble-packed weight.

    Flat arrays (the loops vectorize on them): ``quants`` ``uint8 [rows * pairs * span]`` (byte
    ``k`` of a pair holds element ``k`` of sub-blocks ``2p`` and ``2p + 1``), ``high`` ``uint32
    [rows * subs]`` or empty, ``scale`` and ``low`` ``[rows * subs]`` (``low`` may be empty),
    ``x`` float32 ``[m * subs * span]``, ``xsum`` its sums per sub-block ``[m * subs]`` (read
    where ``low`` is not empty or ``offset`` is not 0); ``out`` is ``[m, rows]``. ``span`` is
    :data:`.quant_gguf_pack.SPAN`.
    """
    pairs = len(quants) // (out.shape[1] * span)
    subs, fifth, shift = 2 * pairs, high.size > 0, np.float32(offset)
    quants, out = quants[first * pairs * span : last * pairs * span], out[:, first:last]
    scale, high = scale[first * subs :], high[first * subs :] if fifth else high
    low = low[first * subs :] if low.size else low
    for r in range(last - first):
        for i in range(out.shape[0]):
            total = np.float32(0)
            for p in range(pairs):
                at, xa, a = (r * pairs + p) * span, (i * pairs + p) * 2 * span, (r * pairs + p) * 2
                xs = (i * pairs + p) * 2
                if fifth:
                    sum_a = _fifth_sum(quants, 0, high[a], at, x, xa, span) - shift * xsum[xs]
                    sum_b = _fifth_sum(quants, 4, high[a + 1], at, x, xa + span, span) - shift * xsum[xs + 1]
                else:
                    sum_a = _nibble_sum(quants, 0, at, x, xa, span) - shift * xsum[xs]
                    sum_b = _nibble_sum(quants, 4, at, x, xa + span, span) - shift * xsum[xs + 1]
                total += scale[a] * sum_a + scale[a + 1] * sum_b
            out[i, r] = total + _lows(low, xsum, subs, r, i)


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def byte_product(
    quants: np.ndarray,
    span: int,
    size: int,
    scale: np.ndarray,
    low: np.ndarray,
    x: np.ndarray,
    xsum: np.ndarray,
    out: np.ndarray,
    first: int,
    last: int,
) -> None:
    """``out[:, first:last] = x @ W[first:last]^T`` for a weight of int8 quants ``[rows * subs *
    size]``, ``size`` ``span`` or half of it (then taken two sub-blocks at a time, the first
    summed apart under a mask); ``x`` float32 ``[m * subs * size]``, the rest as
    :func:`nibble_product`'s."""
    spans, per = len(quants) // (out.shape[1] * span), span // size
    subs = spans * per
    first_part = np.zeros(span, np.float32)
    first_part[:size] = 1
    quants, out = quants[first * spans * span : last * spans * span], out[:, first:last]
    scale, low = scale[first * subs :], low[first * subs :] if low.size else low
    for r in range(last - first):
        for i in range(out.shape[0]):
            total = np.float32(0)
            for a in range(spans):
                at, xa, s = (r * spans + a) * span, (i * spans + a) * span, (r * spans + a) * per
                if per == 1:
                    total += scale[s] * _byte_sum(quants, at, x, xa, span)
                else:
                    whole, part = _byte_sums(quants, first_part, at, x, xa, span)
                    total += scale[s] * part + scale[s + 1] * (whole - part)
            out[i, r] = total + _lows(low, xsum, subs, r, i)
