"""GGUF block-quantized products, ``y = x @ dequantize(W)^T``, and row gathers,
``y = dequantize(W)[x]``, on the raw GGML blocks.

``W`` is the weight's bytes as they lie in the file, bound as ``u32`` words (WGSL has no 8-bit
type) and read a byte at a time, so blocks need not be word-aligned (a Q4_0 block is 18 bytes).
Each element is dequantized in registers as it is used: the weight is never expanded.

One workgroup computes one output ``y[m, r]`` (or gathers one row): its threads take the row's
32-element chunks in turn (a Q4_0 block, or a sub-block of a K-quant super-block), and their sums
meet in workgroup memory. ``FAMILY`` picks the block layout and the layout constants say where its
fields lie, following ggml's ``block_q*`` structs (as ``spawnml_cpu.kernels.quant_gguf`` does on
the host). Each element is dequantized with the float32 operations of ggml's reference in its
order, so a gathered row is ``gguf``'s but where a compiler fuses ``d * q + m`` into one rounding.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

from ..frontend import kernel
from ..ir import Kernel, Scalar, f32, i32, u32
from ..lang import (
    Buffer,
    Const,
    ReadBuffer,
    TypeParam,
    barrier,
    group_id,
    half_to_float,
    load_byte,
    local_id,
    shared,
)

#: The type of ``x``: float32 activations for a product, int32 row indices for a gather.
X = TypeParam("X")

#: Block layouts. LEGACY: Q4_0, Q4_1, Q5_0, Q5_1 (32 nibbles, optional fifth bits and minimum);
#: EIGHT_BIT: Q8_0; K_QUANT: Q4_K and Q5_K (eight 32-element sub-blocks with 6-bit scales and
#: minimums); SIX_BIT_K: Q6_K (sixteen 16-element groups with 8-bit scales).
LEGACY, EIGHT_BIT, K_QUANT, SIX_BIT_K = range(4)
#: Threads that share one output's sum.
THREADS = 32


class Layout(NamedTuple):
    """Where a GGML block type keeps its fields (see :func:`gguf_matmul`)."""

    family: int
    size: int  # elements per block
    bytes: int
    high: bool = False  # a fifth bit per quant (Q5_*)
    minimum: bool = False  # a per-block minimum (Q4_1, Q5_1)


LAYOUTS = {
    "Q4_0": Layout(LEGACY, 32, 18),
    "Q4_1": Layout(LEGACY, 32, 20, minimum=True),
    "Q5_0": Layout(LEGACY, 32, 22, high=True),
    "Q5_1": Layout(LEGACY, 32, 24, high=True, minimum=True),
    "Q8_0": Layout(EIGHT_BIT, 32, 34),
    "Q4_K": Layout(K_QUANT, 256, 144),
    "Q5_K": Layout(K_QUANT, 256, 176, high=True),
    "Q6_K": Layout(SIX_BIT_K, 256, 210),
}


@kernel(workgroup=("WG",))
def gguf_matmul(
    x: ReadBuffer[X],
    w: ReadBuffer[u32],
    y: Buffer[f32],
    outputs_total: u32,
    across: u32,
    rows: u32,
    cols: u32,
    row_bytes: u32,
    X: Const[Scalar],
    GATHER: Const[bool],
    FAMILY: Const[int],
    BYTES: Const[int],
    HIGH: Const[bool],
    MIN: Const[bool],
    SPLIT: Const[bool],
    WG: Const[int],
):
    """``y[m, r] = sum_c x[m, c] * W[r, c]`` (``outputs_total = m * rows`` outputs), or where
    ``GATHER``, ``y[m, :] = W[x[m], :]`` (``x`` the row indices, one output for each). ``W`` is
    ``rows`` rows of ``row_bytes`` bytes of ``BYTES``-byte blocks; ``HIGH``: the quants have a fifth
    bit, ``MIN``: the block has a minimum. ``SPLIT``: a workgroup for each output, its invocations
    taking the chunks in turn; else an invocation for each output, taking them all, without
    barriers (for devices that run on the CPU). Launch ``across`` workgroups per row of the grid.
    """
    partial = shared(f32, WG)
    lid = local_id(0)
    g = group_id(1) * across + group_id(0) if SPLIT else (group_id(1) * across + group_id(0)) * WG + lid
    total = f32(0)
    if g < outputs_total:
        m = g if GATHER else g // rows
        # A gather's index is clamped into the table, which the host checks where it knows it.
        row = u32(min(max(i32(x[g]), 0), i32(rows) - 1)) * row_bytes if GATHER else (g % rows) * row_bytes
        for c in range(lid if SPLIT else 0, cols // 32, WG if SPLIT else 1):
            xs = m * cols + c * 32  # this chunk's first element in x, or in y for a gather
            if FAMILY == LEGACY:
                at = row + c * BYTES
                d_bits = load_byte(w, at) | (load_byte(w, at + 1) << 8)
                d = half_to_float(d_bits)
                low = f32(0)
                if MIN:
                    low_bits = load_byte(w, at + 2) | (load_byte(w, at + 3) << 8)
                    low = half_to_float(low_bits)
                fifth = at + (4 if MIN else 2)
                qh = u32(0)
                if HIGH:
                    for k in range(u32(4)):
                        qh = qh | (load_byte(w, fifth + k) << (k * 8))
                quants = fifth + (4 if HIGH else 0)
                center = 0 if MIN else (16 if HIGH else 8)
                for i in range(u32(16)):  # byte i holds elements i and i + 16
                    b = load_byte(w, quants + i)
                    first = b & 15
                    second = b >> 4
                    if HIGH:
                        first = first | (((qh >> i) & 1) << 4)
                        second = second | (((qh >> (i + 16)) & 1) << 4)
                    value = d * f32(i32(first) - center) + low
                    other = d * f32(i32(second) - center) + low
                    if GATHER:
                        y[xs + i] = value
                        y[xs + 16 + i] = other
                    else:
                        total += value * x[xs + i] + other * x[xs + 16 + i]
            if FAMILY == EIGHT_BIT:
                at = row + c * BYTES
                d_bits = load_byte(w, at) | (load_byte(w, at + 1) << 8)
                d = half_to_float(d_bits)
                for i in range(u32(32)):
                    value = f32(i32(load_byte(w, at + 2 + i) ^ 128) - 128) * d
                    if GATHER:
                        y[xs + i] = value
                    else:
                        total += value * x[xs + i]
            if FAMILY == K_QUANT:
                at = row + (c // 8) * BYTES
                s = c % 8
                d_bits = load_byte(w, at) | (load_byte(w, at + 1) << 8)
                dmin_bits = load_byte(w, at + 2) | (load_byte(w, at + 3) << 8)
                packed = at + 4  # 12 bytes of 6-bit scales and minimums
                scale = load_byte(w, packed + s) & 63
                least = load_byte(w, packed + s + 4) & 63
                if s >= 4:
                    scale = (load_byte(w, packed + s + 4) & 15) | ((load_byte(w, packed + s - 4) >> 6) << 4)
                    least = (load_byte(w, packed + s + 4) >> 4) | ((load_byte(w, packed + s) >> 6) << 4)
                step = half_to_float(d_bits) * f32(scale)
                offset = half_to_float(dmin_bits) * f32(least)
                quants = at + (48 if HIGH else 16) + (s // 2) * 32
                shift = (s % 2) * 4
                for i in range(u32(32)):
                    q = (load_byte(w, quants + i) >> shift) & 15
                    if HIGH:
                        q = q | (((load_byte(w, at + 16 + i) >> s) & 1) << 4)
                    value = step * f32(q) - offset
                    if GATHER:
                        y[xs + i] = value
                    else:
                        total += value * x[xs + i]
            if FAMILY == SIX_BIT_K:
                at = row + (c // 8) * BYTES
                s = c % 8
                d_bits = load_byte(w, at + 208) | (load_byte(w, at + 209) << 8)
                d = half_to_float(d_bits)
                quarter = s % 4
                low_bits = at + (s // 4) * 64 + (quarter % 2) * 32
                low_shift = (quarter // 2) * 4
                high_bits = at + 128 + (s // 4) * 32
                for i in range(u32(32)):
                    scale = i32(load_byte(w, at + 192 + s * 2 + i // 16) ^ 128) - 128
                    q = ((load_byte(w, low_bits + i) >> low_shift) & 15) | (
                        ((load_byte(w, high_bits + i) >> (quarter * 2)) & 3) << 4
                    )
                    value = d * f32(scale) * f32(i32(q) - 32)
                    if GATHER:
                        y[xs + i] = value
                    else:
                        total += value * x[xs + i]
    if not SPLIT and not GATHER and g < outputs_total:
        y[g] = total
    if SPLIT and not GATHER:
        partial[lid] = total
        barrier()
        stride = u32(WG // 2)
        while stride > 0:
            if lid < stride:
                partial[lid] += partial[lid + stride]
            barrier()
            stride = stride // 2
        if lid == 0 and g < outputs_total:
            y[g] = partial[0]


@cache
def block_kernel(quant_type: str, gather: bool, split: bool = True) -> Kernel:
    """:func:`gguf_matmul` for the blocks of ``quant_type`` (a key of :data:`LAYOUTS`): the
    product, or the gather of rows where ``gather``; a workgroup for each output where ``split``,
    else an invocation."""
    layout = LAYOUTS[quant_type]
    return gguf_matmul.specialize(
        X=i32 if gather else f32,
        GATHER=gather,
        FAMILY=layout.family,
        BYTES=layout.bytes,
        HIGH=layout.high,
        MIN=layout.minimum,
        SPLIT=split,
        WG=THREADS,
    )
