"""GGUF products with a few activation rows, on weights repacked once (:mod:`.quant_gguf_pack`).

A decode step multiplies one row by every weight, so it is bound by the weights' bytes: the
loops of :mod:`.quant_gguf_loops` read each 4-bit weight as 4 bits. Each weight buffer is
repacked the first time a product reads it and kept while the buffer lives (a session's
initializers live as long as the session), so a model's weights are repacked once, at its
first run. A product is one threaded region: its weight rows are cut into parts that the
backend's threads take.
"""

from __future__ import annotations

import mmap
import threading
import weakref
from functools import partial

import numpy as np

from . import quant_gguf_loops as loops
from .quant_gguf_pack import SPAN, PackedWeight, pack
from .threads import part_count, run_parts, spans

Array = np.ndarray
#: The least work (multiply-adds) split over threads: a decode step's smallest products (a
#: small model's key and value projections) take about as long as handing a part over.
MIN_SPLIT_WORK = 500_000

#: Repacked weights by the id of the buffer they came from, with a weak reference to the buffer
#: (an id is reused once its object is freed) and the block type.
_packed: dict[int, tuple[weakref.ref[Array], str, PackedWeight]] = {}
_packing = threading.Lock()


def packed_weight(w: Array, rows: int, quant_type: str) -> PackedWeight:
    """``w`` (``rows`` rows of raw ``quant_type`` blocks) repacked, from the cache if it was."""
    key = id(w)
    with _packing:
        cached = _packed.get(key)
        if cached is not None and cached[0]() is w and cached[1] == quant_type:
            return cached[2]
        packed = pack(w.reshape(rows, -1), quant_type)
        _packed[key] = (weakref.ref(w, partial(_forget, key)), quant_type, packed)
        release_file_pages(w)
        return packed


def release_file_pages(w: Array) -> None:
    """Drop the pages of ``w`` from this process's resident memory where ``w`` lies in a read-only
    file map (a GGUF file as the loader maps it): once repacked, the raw blocks are read only by
    what reads the file itself (an embedding row, a GPU upload), and the kernel maps those pages
    back from its page cache then. Other memory (a copy, anything writable) is left alone."""
    root: object = w
    while getattr(root, "base", None) is not None:
        root = root.base  # type: ignore[attr-defined]
    if not isinstance(root, mmap.mmap) or not memoryview(root).readonly or not w.flags.c_contiguous:
        return
    origin = np.frombuffer(root, np.uint8).ctypes.data
    first = -(-(w.ctypes.data - origin) // mmap.PAGESIZE) * mmap.PAGESIZE  # whole pages of w only
    last = (w.ctypes.data - origin + w.nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
    if last > first:
        root.madvise(mmap.MADV_DONTNEED, first, last - first)


def _forget(key: int, reference: weakref.ref[Array]) -> None:
    """Drop the repacked copy of a buffer that was freed (unless the id holds a newer one)."""
    cached = _packed.get(key)
    if cached is not None and cached[0] is reference:
        del _packed[key]


def product(x: Array, w: PackedWeight) -> Array:
    """``x @ W^T`` for float32 ``x`` ``[..., cols]``, ``[..., rows]`` float32."""
    flat = np.ascontiguousarray(x.reshape(-1, w.cols), dtype=np.float32)
    padded = w.subs * w.size
    if padded != w.cols:  # a zero sub-block that pairs nibbles
        flat = np.pad(flat, [(0, 0), (0, padded - w.cols)])
    xsum = flat.reshape(-1, w.size).sum(-1) if w.low.size or w.offset else np.empty(0, np.float32)
    out = np.empty((len(flat), w.rows), np.float32)
    if not len(flat):
        return out.reshape(*x.shape[:-1], w.rows)
    if w.nibbles:
        run = partial(
            loops.nibble_product, w.quants, SPAN, w.high, w.offset, w.scale, w.low, flat.ravel(), xsum, out
        )
    else:
        run = partial(loops.byte_product, w.quants, SPAN, w.size, w.scale, w.low, flat.ravel(), xsum, out)
    count = part_count(len(flat) * w.rows * w.cols, w.rows, least=MIN_SPLIT_WORK)
    run_parts([partial(run, part.start, part.stop) for part in spans(w.rows, count)])
    return out.reshape(*x.shape[:-1], w.rows)
