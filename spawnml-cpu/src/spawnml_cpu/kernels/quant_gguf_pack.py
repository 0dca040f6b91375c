"""GGUF weights repacked once for the product loops of :mod:`.quant_gguf_loops`.

Every supported block type is read as sub-blocks of ``S`` elements (32, or 16 for the K-quants
with 16-element scales) whose values are ``scale * (q - offset) + low``: an integer ``q`` per
element, one float32 ``scale`` and ``low`` per sub-block (``low`` is 0 for the types without a
minimum). The scales are ggml's float32 products (``d * sc``, ``dmin * m``), so each element's
value is ggml's. The quants keep their width where it is 4 bits (and the fifth bit of the Q5
types as a bit mask); wider ones (Q8_0, Q6_K, Q2_K, Q3_K) are held as one int8 each. Nothing is
expanded to float32.

The loops vectorize their innermost loop over 32 consecutive quants (numba leaves LLVM's
straight-line vectorizer off, so only loops vectorize, and a loop of 16 runs in its scalar
remainder). So a nibble byte ``k`` holds element ``k`` of two consecutive 32-element sub-blocks,
the first in its low nibble, and 16-element sub-blocks are taken two at a time.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import quant_gguf as q

Array = np.ndarray
#: Elements the loops' innermost loop runs over.
SPAN = 32
#: Weight rows repacked at a time, bounding the scratch memory of the integer quants.
PACK_CHUNK = 1024
#: The types repacked as nibbles (with a fifth bit for the Q5 ones), the others as bytes.
NIBBLE_TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K")
BYTE_TYPES = ("Q8_0", "Q6_K", "Q2_K", "Q3_K")
PACKED_TYPES = NIBBLE_TYPES + BYTE_TYPES
FIFTH_BIT_TYPES = ("Q5_0", "Q5_1", "Q5_K")


class PackedWeight(NamedTuple):
    """A ``[rows, cols]`` weight repacked for :mod:`.quant_gguf_loops`, every array flat.

    ``size`` is the sub-block size ``S`` and ``subs`` the sub-blocks of a row (for nibbles, made
    even with a zero sub-block). ``quants`` is ``uint8 [rows, subs / 2, 32]`` of nibble pairs
    for the nibble types, ``int8 [rows, subs, S]`` for the others; ``high`` the fifth bits
    ``uint32 [rows, subs]`` (bit ``j`` for element ``j``; empty but for Q5); ``scale`` and
    ``low`` float32 ``[rows, subs]`` (``low`` empty where it is 0).
    """

    rows: int
    cols: int
    size: int
    offset: int
    quants: Array
    high: Array
    scale: Array
    low: Array

    @property
    def subs(self) -> int:
        return len(self.scale) // self.rows

    @property
    def nibbles(self) -> bool:
        return self.quants.dtype == np.uint8


class _Parts(NamedTuple):
    """One chunk of rows decoded to integer quants ``[rows, subs, S]`` and their scales."""

    quants: Array
    scale: Array
    low: Array | None


def _zero_offset(blocks: Array, start: int, nibble_bytes: int, high: int | None) -> Array:
    """Quants of a 32-element block type: nibbles at ``start``, fifth bits at ``high``."""
    quants = q.nibbles(blocks[:, start : start + nibble_bytes])
    if high is not None:
        quants |= q.high_bits_32(blocks, high) << np.uint8(4)
    return quants[:, None, :]


def _parts(blocks: Array, quant_type: str) -> _Parts:
    """The quants and per-sub-block scales of ``blocks`` ``[n, block_bytes]``, ``n`` blocks in a row
    of sub-blocks (each block is one sub-block of 32, or 8 or 16 for the K-quants)."""
    if quant_type == "Q4_0":
        return _Parts(_zero_offset(blocks, 2, 16, None), q.half_at(blocks, 0), None)
    if quant_type == "Q4_1":
        return _Parts(_zero_offset(blocks, 4, 16, None), q.half_at(blocks, 0), q.half_at(blocks, 2))
    if quant_type == "Q5_0":
        return _Parts(_zero_offset(blocks, 6, 16, 2), q.half_at(blocks, 0), None)
    if quant_type == "Q5_1":
        return _Parts(_zero_offset(blocks, 8, 16, 4), q.half_at(blocks, 0), q.half_at(blocks, 2))
    if quant_type == "Q8_0":
        return _Parts(blocks[:, None, 2:34].view(np.int8), q.half_at(blocks, 0), None)
    n = len(blocks)
    if quant_type in ("Q4_K", "Q5_K"):
        scales, mins = q.k_scales(blocks[:, 4:16])
        nibbles = blocks[:, 16:144] if quant_type == "Q4_K" else blocks[:, 48:176]
        quants = q.nibbles(nibbles.reshape(n, 4, 32)).reshape(n, 8, 32)
        if quant_type == "Q5_K":
            quants |= q.bit_planes(blocks[:, 16:48], 1) << np.uint8(4)
        return _Parts(quants, q.half_at(blocks, 0) * scales, -(q.half_at(blocks, 2) * mins))
    if quant_type == "Q6_K":
        low = q.nibbles(blocks[:, :128].reshape(n, 2, 64))
        high = q.bit_planes(blocks[:, 128:192].reshape(n, 2, 32), 2).reshape(n, 2, 128)
        quants = ((low | (high << np.uint8(4))).astype(np.int8) - np.int8(32)).reshape(n, 16, 16)
        return _Parts(quants, q.half_at(blocks, 208) * blocks[:, 192:208].view(np.int8), None)
    if quant_type == "Q2_K":
        scales = blocks[:, :16]
        quants = q.bit_planes(blocks[:, 16:80].reshape(n, 2, 32), 2).reshape(n, 16, 16).view(np.int8)
        step = q.half_at(blocks, 80) * (scales & np.uint8(0x0F))
        return _Parts(quants, step, -(q.half_at(blocks, 82) * (scales >> np.uint8(4))))
    if quant_type == "Q3_K":
        packed = blocks[:, 96:108]
        scale_high = q.bit_planes(packed[:, 8:12], 2).reshape(n, 16)
        scales = (q.nibbles(packed[:, :8]) | (scale_high << np.uint8(4))).astype(np.int8) - np.int8(32)
        quants = q.bit_planes(blocks[:, 32:96].reshape(n, 2, 32), 2).reshape(n, 16, 16).astype(np.int8)
        missing = (q.bit_planes(blocks[:, :32], 1).reshape(n, 16, 16) ^ np.uint8(1)) << np.uint8(2)
        return _Parts(quants - missing.astype(np.int8), q.half_at(blocks, 108) * scales, None)
    raise ValueError(f"{quant_type} weights are not repacked; the packed types are {list(PACKED_TYPES)}")


def pack(weights: Array, quant_type: str) -> PackedWeight:
    """Repack the raw blocks ``uint8 [rows, row_bytes]`` of ``quant_type`` (see :class:`PackedWeight`)."""
    block = q.BLOCK_TYPES[quant_type]
    cols = weights.shape[1] // block.bytes * block.size
    chunks = [
        _pack_rows(weights[start : start + PACK_CHUNK], quant_type, block.bytes)
        for start in range(0, len(weights), PACK_CHUNK)
    ]
    quants, high, scale, low = (np.concatenate([chunk[i] for chunk in chunks]) for i in range(4))
    size = SPAN if quant_type in NIBBLE_TYPES else quants.shape[2]
    offset = 8 if quant_type == "Q4_0" else 16 if quant_type == "Q5_0" else 0
    return PackedWeight(len(weights), cols, size, offset, *(a.ravel() for a in (quants, high, scale, low)))


def _pack_rows(weights: Array, quant_type: str, block_bytes: int) -> tuple[Array, Array, Array, Array]:
    """Quants, fifth bits, scales and lows (see :class:`PackedWeight`) of a few rows of blocks."""
    n = len(weights)
    parts = _parts(np.ascontiguousarray(weights).reshape(-1, block_bytes), quant_type)
    quants = parts.quants.reshape(n, -1, parts.quants.shape[-1])
    scale = parts.scale.astype(np.float32).reshape(n, -1)
    low = np.zeros((n, 0), np.float32) if parts.low is None else parts.low.astype(np.float32).reshape(n, -1)
    if quant_type not in NIBBLE_TYPES:
        return quants, np.zeros((n, 0), np.uint32), scale, low
    if quants.shape[1] % 2:  # a zero sub-block makes whole pairs
        quants, scale = np.pad(quants, [(0, 0), (0, 1), (0, 0)]), np.pad(scale, [(0, 0), (0, 1)])
        low = np.pad(low, [(0, 0), (0, 1 if low.size else 0)])
    high = np.zeros((n, 0), np.uint32)
    if quant_type in FIFTH_BIT_TYPES:
        bits = (quants >> np.uint8(4)).astype(np.uint32) << np.arange(SPAN, dtype=np.uint32)
        high = np.bitwise_or.reduce(bits, axis=-1)
    pairs = (quants & np.uint8(0x0F)).reshape(n, -1, 2, SPAN)
    return pairs[:, :, 0] | (pairs[:, :, 1] << np.uint8(4)), high, scale, low


def dequantized(w: PackedWeight, start: int, stop: int) -> Array:
    """Rows ``start:stop`` of ``w`` as float32 ``[stop - start, cols]``: ``scale * (q - offset) + low``,
    ggml's values bit for bit (the same float32 operations as its dequantizers)."""
    rows, subs = stop - start, w.subs
    if w.nibbles:
        half = subs // 2 * SPAN
        pairs = w.quants[start * half : stop * half].reshape(rows, subs // 2, 1, SPAN)
        q = np.concatenate([pairs & np.uint8(0x0F), pairs >> np.uint8(4)], axis=2).reshape(rows, subs, SPAN)
        if w.high.size:
            high = w.high[start * subs : stop * subs].reshape(rows, subs, 1)
            q |= ((high >> np.arange(SPAN, dtype=np.uint32)) & np.uint32(1)).astype(np.uint8) << np.uint8(4)
    else:
        q = w.quants[start * subs * w.size : stop * subs * w.size].reshape(rows, subs, w.size)
    values = w.scale[start * subs : stop * subs].reshape(rows, subs, 1) * (
        q.astype(np.float32) - np.float32(w.offset)
    )
    if w.low.size:
        values += w.low[start * subs : stop * subs].reshape(rows, subs, 1)
    return values.reshape(rows, -1)[:, : w.cols]
