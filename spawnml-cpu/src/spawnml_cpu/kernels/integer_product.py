"""Exact products of 8-bit quantized matrices, ``(a - a_zero) @ (b - b_zero)``, in int32.

MatMulInteger, QLinearMatMul and the quantized contrib products all reduce to this. Numpy has no
integer GEMM, and converting both operands to float64 for BLAS costs more than the product
itself when ``b`` is a large weight (8 bytes written and read per 1-byte weight, every run).
Here the 8-bit values are widened inside a compiled loop instead, each row of ``a`` at a time,
rows cut over the backend's threads; sums are exact, so any cut gives the same bits.
Other shapes and types (batched ``b``, 16-bit values, zero points of other shapes) go through
float64 BLAS, also exactly.
"""

from __future__ import annotations

import functools
from types import ModuleType

import numpy as np

from .nn_common import matmul
from .threads import part_count, run_spans, thread_count

Array = np.ndarray
EIGHT_BIT = frozenset({np.dtype(np.int8), np.dtype(np.uint8)})


def shifted(values: Array, zero_point: Array | None) -> Array:
    """Quantized values minus their zero point, as float64 (exact up to 32-bit integers)."""
    values = values.astype(np.float64)
    return values if zero_point is None else values - zero_point.astype(np.float64)


def integer_matmul(a: Array, b: Array, a_zero: Array | None, b_zero: Array | None) -> Array:
    """``(a - a_zero) @ (b - b_zero)`` exactly: int32 from the compiled loop, float64 otherwise.

    ``a_zero`` is a scalar, or one per row of a 2-D ``a``; ``b_zero`` a scalar or one per column.
    """
    rows = a.shape[-2] if a.ndim >= 2 else 1
    a_zeros = _zeros(a_zero, rows, per_row_allowed=a.ndim == 2)
    b_zeros = _zeros(b_zero, b.shape[-1], per_row_allowed=True)
    compiled = a.dtype in EIGHT_BIT and b.dtype in EIGHT_BIT and b.ndim == 2 and a.ndim >= 1
    if not compiled or a_zeros is None or b_zeros is None:
        if a_zero is not None and a_zero.ndim == 1 and a_zero.size > 1:
            a_zero = a_zero[:, None]
        return matmul(shifted(a, a_zero), shifted(b, b_zero))
    flat = np.ascontiguousarray(a.reshape(-1, a.shape[-1]))
    zeros = np.tile(a_zeros, len(flat) // rows) if a_zeros.size == rows else np.full(len(flat), a_zeros[0])
    out = np.empty((len(flat), b.shape[1]), np.int32)
    weights = np.ascontiguousarray(b)
    threads = thread_count()
    parts = part_count(flat.size * b.shape[1], len(flat), threads)
    loop = _loops().product_rows
    run_spans(
        lambda span: loop(flat, weights, zeros, b_zeros, out, span.start, span.stop),
        len(flat),
        parts,
        threads,
    )
    return out.reshape(*a.shape[:-1], b.shape[1])


def _zeros(zero_point: Array | None, count: int, per_row_allowed: bool) -> Array | None:
    """The zero point as ``count`` int32 values (or one, broadcast), None where its shape is not one
    the compiled loop takes."""
    if zero_point is None:
        return np.zeros(count, np.int32)
    if zero_point.size == 1:
        return np.full(count, int(zero_point.reshape(-1)[0]), np.int32)
    if per_row_allowed and zero_point.ndim == 1 and zero_point.size == count:
        return zero_point.astype(np.int32)
    return None


@functools.cache
def _loops() -> ModuleType:
    """The compiled loop, imported on first use (numba takes a while to import)."""
    from . import integer_product_loops

    return integer_product_loops
