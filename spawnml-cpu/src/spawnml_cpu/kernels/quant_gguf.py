"""``spawnml.gguf::QuantizedMatMul``: GGUF block-quantized weights, never expanded to float32 for
products with a few activation rows (a decode step's), which run on the weight repacked once
(:mod:`.quant_gguf_product`); above that, rows of the same repacked weight are dequantized a chunk
at a time for BLAS, so that a prompt reads the raw blocks no more than a decode step does.
``spawnml.gguf::QuantizedGather``: the rows looked up, dequantized.

Each dequantizer takes ``blocks``, a ``uint8`` array ``[n, block_bytes]`` of one GGML block type,
and returns ``[n, block_size]`` float32, vectorised over blocks. They follow the block layouts of
ggml's ``block_q*`` structs (little-endian float16 scales, packed nibbles and bit planes) and
perform the same float32 operations in the same order as ggml's reference, so they are
bit-exact with it. Written here, not imported, because the kernel language renders the same
per-block arithmetic for GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import numpy as np
from spawnml.backend import KernelContext
from spawnml.ir import Node
from spawnml.ops.defs.quant_gguf import DOMAIN, block_problem
from spawnml.ops.shapes import as_text

from .nn_common import matmul, widen
from .table import KERNELS

Array = np.ndarray
FLOAT32 = np.dtype(np.float32)
#: Elements in one super-block of the K-quants.
QK_K = 256
#: Weight rows dequantized at a time, bounding the kernel's scratch memory.
ROW_CHUNK = 4096
#: Activation rows up to which products run on the weight repacked once (every block type but
#: BF16; a decode step has one row): above, dequantizing once for a BLAS GEMM is quicker.
PACKED_PRODUCT_ROWS = 8


def half_at(blocks: Array, start: int) -> Array:
    """The float16 at byte ``start`` of each block, as float32 ``[n, 1]``."""
    return blocks[:, start : start + 2].copy().view(np.float16).astype(np.float32)


def nibbles(packed: Array) -> Array:
    """Low nibbles of every byte, then the high nibbles: ``[..., k] -> [..., 2k]``."""
    return np.concatenate([packed & np.uint8(0x0F), packed >> np.uint8(4)], axis=-1)


def bit_planes(packed: Array, bits: int) -> Array:
    """``bits``-wide fields of every byte, lowest field first, each field plane whole:
    ``[..., k] -> [..., 8 / bits, k]``."""
    shifts = np.arange(0, 8, bits, dtype=np.uint8)[:, None]
    return (packed[..., None, :] >> shifts) & np.uint8((1 << bits) - 1)


def high_bits_32(blocks: Array, start: int) -> Array:
    """The 32 single bits of the little-endian uint32 at byte ``start``, bit ``i`` for element ``i``."""
    return bit_planes(blocks[:, start : start + 4], 1).transpose(0, 2, 1).reshape(-1, 32)


def _q4_0(blocks: Array) -> Array:
    q = nibbles(blocks[:, 2:18]).astype(np.int8) - np.int8(8)
    return half_at(blocks, 0) * q.astype(np.float32)


def _q4_1(blocks: Array) -> Array:
    q = nibbles(blocks[:, 4:20]).astype(np.float32)
    return half_at(blocks, 0) * q + half_at(blocks, 2)


def _q5_0(blocks: Array) -> Array:
    q = nibbles(blocks[:, 6:22]) | (high_bits_32(blocks, 2) << np.uint8(4))
    return half_at(blocks, 0) * (q.astype(np.int8) - np.int8(16)).astype(np.float32)


def _q5_1(blocks: Array) -> Array:
    q = nibbles(blocks[:, 8:24]) | (high_bits_32(blocks, 4) << np.uint8(4))
    return half_at(blocks, 0) * q.astype(np.float32) + half_at(blocks, 2)


def _q8_0(blocks: Array) -> Array:
    return blocks[:, 2:34].view(np.int8).astype(np.float32) * half_at(blocks, 0)


def _q2_k(blocks: Array) -> Array:
    n = len(blocks)
    scales = blocks[:, :16]
    d, dmin = half_at(blocks, 80), half_at(blocks, 82)
    step = (d * (scales & np.uint8(0x0F)).astype(np.float32))[..., None]
    low = (dmin * (scales >> np.uint8(4)).astype(np.float32))[..., None]
    q = bit_planes(blocks[:, 16:80].reshape(n, 2, 32), 2).reshape(n, 16, 16).astype(np.float32)
    return (step * q - low).reshape(n, QK_K)


def _q3_k(blocks: Array) -> Array:
    n = len(blocks)
    packed = blocks[:, 96:108]
    low = nibbles(packed[:, :8])
    high = bit_planes(packed[:, 8:12], 2).reshape(n, 16)
    scales = ((low | (high << np.uint8(4))).astype(np.int8) - np.int8(32)).astype(np.float32)
    step = (half_at(blocks, 108) * scales)[..., None]
    q = bit_planes(blocks[:, 32:96].reshape(n, 2, 32), 2).reshape(n, 16, 16)
    missing = (bit_planes(blocks[:, :32], 1).reshape(n, 16, 16) ^ np.uint8(1)) << np.uint8(2)
    return (step * (q.astype(np.int8) - missing.astype(np.int8)).astype(np.float32)).reshape(n, QK_K)


def k_scales(packed: Array) -> tuple[Array, Array]:
    """The eight 6-bit scales and mins of a Q4_K / Q5_K super-block, from 12 bytes."""
    first, second, rest = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    six = np.uint8(0x3F)
    scales = np.concatenate(
        [first & six, (rest & np.uint8(0x0F)) | ((first >> np.uint8(2)) & np.uint8(0x30))], 1
    )
    mins = np.concatenate(
        [second & six, (rest >> np.uint8(4)) | ((second >> np.uint8(2)) & np.uint8(0x30))], 1
    )
    return scales.astype(np.float32), mins.astype(np.float32)


def _k_dequantize(blocks: Array, q: Array) -> Array:
    """``d * scale * q - dmin * min`` per 32-element sub-block of a Q4_K / Q5_K super-block."""
    scales, mins = k_scales(blocks[:, 4:16])
    step = (half_at(blocks, 0) * scales)[..., None]
    low = (half_at(blocks, 2) * mins)[..., None]
    return (step * q.astype(np.float32) - low).reshape(len(blocks), QK_K)


def _q4_k(blocks: Array) -> Array:
    return _k_dequantize(blocks, nibbles(blocks[:, 16:144].reshape(-1, 4, 32)).reshape(-1, 8, 32))


def _q5_k(blocks: Array) -> Array:
    low = nibbles(blocks[:, 48:176].reshape(-1, 4, 32)).reshape(-1, 8, 32)
    return _k_dequantize(blocks, low | (bit_planes(blocks[:, 16:48], 1) << np.uint8(4)))


def _q6_k(blocks: Array) -> Array:
    n = len(blocks)
    low = nibbles(blocks[:, :128].reshape(n, 2, 64))
    high = bit_planes(blocks[:, 128:192].reshape(n, 2, 32), 2).reshape(n, 2, 128)
    q = ((low | (high << np.uint8(4))).astype(np.int8) - np.int8(32)).astype(np.float32)
    step = (half_at(blocks, 208) * blocks[:, 192:208].view(np.int8).astype(np.float32))[..., None]
    return (step * q.reshape(n, 16, 16)).reshape(n, QK_K)


def _bf16(blocks: Array) -> Array:
    return (blocks.view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


class BlockType(NamedTuple):
    """One GGML block type: elements and bytes per block, and its dequantizer."""

    size: int
    bytes: int
    dequantize: Callable[[Array], Array]


BLOCK_TYPES: dict[str, BlockType] = {
    "BF16": BlockType(1, 2, _bf16),
    "Q4_0": BlockType(32, 18, _q4_0),
    "Q4_1": BlockType(32, 20, _q4_1),
    "Q5_0": BlockType(32, 22, _q5_0),
    "Q5_1": BlockType(32, 24, _q5_1),
    "Q8_0": BlockType(32, 34, _q8_0),
    "Q2_K": BlockType(QK_K, 84, _q2_k),
    "Q3_K": BlockType(QK_K, 110, _q3_k),
    "Q4_K": BlockType(QK_K, 144, _q4_k),
    "Q5_K": BlockType(QK_K, 176, _q5_k),
    "Q6_K": BlockType(QK_K, 210, _q6_k),
}


def dequantize(data: Array, quant_type: str) -> Array:
    """Float32 values of raw GGUF blocks ``[..., k * block_bytes]`` -> ``[..., k * block_size]``."""
    block = BLOCK_TYPES[quant_type]
    if data.shape[-1] % block.bytes:
        raise ValueError(
            f"{quant_type} data's last dimension {data.shape[-1]} is not whole blocks of {block.bytes} bytes"
        )
    values = block.dequantize(np.ascontiguousarray(data, dtype=np.uint8).reshape(-1, block.bytes))
    return values.reshape(*data.shape[:-1], data.shape[-1] // block.bytes * block.size)


#: Elements a block of each block type.
_BLOCK_SIZES = {name: block.size for name, block in BLOCK_TYPES.items()}


def _check_shape(node: Node, opset: int) -> str | None:
    return block_problem(node, _BLOCK_SIZES, "the CPU")


def _blocks(ctx: KernelContext, w: Array) -> tuple[Array, str]:
    """``W`` as ``[rows, row_bytes]`` blocks and their type, refused unless the attributes describe it."""
    quant_type, rows, cols = as_text(ctx.attrs["quant_type"]), ctx.attrs["rows"], ctx.attrs["cols"]
    block = BLOCK_TYPES[quant_type]
    row_bytes = cols // block.size * block.bytes
    if w.dtype != np.uint8 or w.size != rows * row_bytes:
        raise ValueError(
            f"W is {w.dtype} {list(w.shape)}, not uint8 [{rows}, {row_bytes}] of {quant_type} blocks"
        )
    return w.reshape(rows, row_bytes), quant_type


@KERNELS.register("QuantizedGather", domain=DOMAIN, check=_check_shape)
def _quantized_gather(ctx: KernelContext, w: Array, indices: Array) -> Array:
    """The rows ``indices`` of ``W``, dequantized: ``[*indices.shape, cols]`` float32."""
    weights, quant_type = _blocks(ctx, w)
    if indices.dtype.kind not in "iu":
        raise ValueError(f"QuantizedGather indices must be integers, not {indices.dtype}")
    if indices.size and (indices.min() < 0 or indices.max() >= len(weights)):
        raise IndexError(
            f"QuantizedGather indices must lie in [0, {len(weights)}), not {indices.min()}..{indices.max()}"
        )
    rows = dequantize(weights[indices.ravel()], quant_type)
    return rows.reshape(*indices.shape, ctx.attrs["cols"])


@KERNELS.register("QuantizedMatMul", domain=DOMAIN, check=_check_shape)
def _quantized_matmul(ctx: KernelContext, a: Array, w: Array) -> Array:
    """``A @ W^T``: on the repacked weight for a few activation rows, else dequantizing
    ``ROW_CHUNK`` rows of it (of the raw blocks for BF16, which is not repacked) at a time for BLAS."""
    weights, quant_type = _blocks(ctx, w)
    rows = len(weights)
    x = widen(a)
    if quant_type == "BF16":
        products = _chunked_product(x, lambda start, stop: dequantize(weights[start:stop], quant_type), rows)
        return products.astype(a.dtype, copy=False)
    from . import quant_gguf_pack, quant_gguf_product

    packed = quant_gguf_product.packed_weight(w, rows, quant_type)
    if math.prod(x.shape[:-1]) <= PACKED_PRODUCT_ROWS:
        return quant_gguf_product.product(x, packed).astype(a.dtype, copy=False)
    return _chunked_product(x, partial(quant_gguf_pack.dequantized, packed), rows).astype(a.dtype, copy=False)


def _chunked_product(x: Array, rows_of: Callable[[int, int], Array], rows: int) -> Array:
    """``x @ W^T`` with the float32 rows of ``W`` made ``ROW_CHUNK`` at a time by ``rows_of(start, stop)``."""
    parts = [matmul(x, rows_of(start, min(start + ROW_CHUNK, rows)).T) for start in range(0, rows, ROW_CHUNK)]
    return np.concatenate(parts, axis=-1)
