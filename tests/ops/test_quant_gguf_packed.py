"""GGUF weights repacked for the few-row products (``spawnml_cpu.kernels.quant_gguf_pack``) and
the compiled product loops over them.

The repacking must keep every weight exactly: ``scale * (q - offset) + low`` rebuilt from the
packed arrays equals ``gguf.quants.dequantize`` bit for bit (both are ggml's float32 operations),
and so must the rows the prompts' products dequantize from it.
The loops sum ``scale * sum((q - offset) * x) + low * sum(x)`` in float32 in another order than
float64: they are checked against float64 within the worst-case float32 rounding of those sums
(``cols * eps`` times the sum of the terms' magnitudes).
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as reference_dequantize
from spawnml_cpu.kernels.quant_gguf_pack import (
    NIBBLE_TYPES,
    PACKED_TYPES,
    SPAN,
    PackedWeight,
    dequantized,
    pack,
)
from spawnml_cpu.kernels.quant_gguf_product import product, release_file_pages

from tests.ops.test_quant_gguf import blocks_of

rng = np.random.default_rng(1)


def cols_for(quant_type: str) -> int:
    """Columns that leave an odd number of 32-element blocks (a padding sub-block for nibbles)."""
    return 512 if quant_type.endswith("_K") else 5 * 32


def unpacked(w: PackedWeight) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(q - offset, scale, low)`` per element, ``[rows, subs * size]`` each, from the layout."""
    if w.nibbles:
        pairs = w.quants.reshape(w.rows, -1, SPAN)
        q = np.stack([pairs & 0x0F, pairs >> 4], axis=2).reshape(w.rows, w.subs, SPAN).astype(np.int32)
        if w.high.size:
            bits = (w.high.reshape(w.rows, w.subs, 1) >> np.arange(SPAN, dtype=np.uint32)) & 1
            q |= bits.astype(np.int32) << 4
    else:
        q = w.quants.reshape(w.rows, w.subs, w.size).astype(np.int32)
    low = w.low if w.low.size else np.zeros_like(w.scale)
    per_element = [np.repeat(a.reshape(w.rows, w.subs), w.size, axis=1) for a in (w.scale, low)]
    return (q - w.offset).reshape(w.rows, -1), per_element[0], per_element[1]


@pytest.mark.parametrize("quant_type", PACKED_TYPES)
def test_repacked_weights_are_exactly_gguf(quant_type: str) -> None:
    rows, cols = 37, cols_for(quant_type)
    weights = blocks_of(quant_type, rows, cols)
    w = pack(weights, quant_type)
    q, scale, low = unpacked(w)
    rebuilt = scale * q.astype(np.float32) + low
    assert w.nibbles == (quant_type in NIBBLE_TYPES)
    np.testing.assert_array_equal(rebuilt[:, w.cols :], 0)  # the padding sub-block
    want = reference_dequantize(weights, GGMLQuantizationType[quant_type])
    np.testing.assert_array_equal(rebuilt[:, : w.cols], want)


@pytest.mark.parametrize("quant_type", PACKED_TYPES)
def test_rows_dequantized_from_the_repacked_weight_are_exactly_gguf(quant_type: str) -> None:
    rows, cols = 37, cols_for(quant_type)
    weights = blocks_of(quant_type, rows, cols)
    want = reference_dequantize(weights, GGMLQuantizationType[quant_type])
    w = pack(weights, quant_type)
    np.testing.assert_array_equal(dequantized(w, 0, rows), want)
    np.testing.assert_array_equal(dequantized(w, 5, 20), want[5:20])


def test_released_pages_of_a_file_map_read_back_and_other_memory_is_kept(tmp_path: Path) -> None:
    """Releasing the raw blocks' pages changes no value: a read-only file map reads them back from
    the file; a writable map (which the release would zero) is left alone."""
    data = rng.integers(0, 256, 5 * mmap.PAGESIZE, dtype=np.uint8)
    path = tmp_path / "blocks"
    data.tofile(path)
    mapped = np.memmap(path, mode="r")[100:]
    release_file_pages(mapped)
    np.testing.assert_array_equal(mapped, data[100:])
    with mmap.mmap(-1, data.nbytes) as anonymous:
        writable = np.frombuffer(anonymous, np.uint8)
        writable[:] = data
        release_file_pages(writable[100:])
        np.testing.assert_array_equal(writable, data)
        del writable


@pytest.mark.parametrize("leading", [(1,), (3,), (2, 4)], ids=str)
@pytest.mark.parametrize("quant_type", PACKED_TYPES)
def test_product_matches_float64(quant_type: str, leading: tuple[int, ...]) -> None:
    rows, cols = 37, cols_for(quant_type)
    w = pack(blocks_of(quant_type, rows, cols), quant_type)
    x = rng.standard_normal((*leading, cols)).astype(np.float32)
    q, scale, low = (a[:, :cols].astype(np.float64) for a in unpacked(w))
    x64 = x.reshape(-1, cols).astype(np.float64)
    want = x64 @ (scale * q + low).T
    magnitude = np.abs(x64) @ (np.abs(scale * q) + np.abs(low)).T
    y = product(x, w)
    assert y.dtype == np.float32 and y.shape == (*leading, rows)
    bound = cols * np.finfo(np.float32).eps * magnitude
    np.testing.assert_array_less(np.abs(y.reshape(-1, rows) - want), bound)


def test_rows_split_over_threads_give_the_same_bits() -> None:
    """A product cut into parts (rows from 500k multiply-adds on) equals it run whole."""
    from threadpoolctl import threadpool_limits

    w = pack(blocks_of("Q4_1", 2048, 512), "Q4_1")
    x = rng.standard_normal((1, 512)).astype(np.float32)
    with threadpool_limits(1):
        whole = product(x, w)
    with threadpool_limits(2):
        split = product(x, w)
    np.testing.assert_array_equal(split, whole)
