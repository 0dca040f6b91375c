"""Exact products of 8-bit quantized matrices, ``(a - a_zero) @ (b - b_zero)``.

MatMulInteger, QLinearMatMul, ConvInteger and the quantized contrib products all reduce to this.
Numpy has no integer GEMM, but float32 BLAS is exact here: 8-bit values less 8-bit zero points
are integers of magnitude at most 255, so each product is an integer below 2**16, and a sum of
such products stays exact in float32 as long as it stays within 2**24 (float32's 24-bit
significand holds every integer up to 2**24). A product over ``K`` terms, each at most
``bound`` in magnitude, is therefore cut into runs of ``2**24 // bound`` terms: whatever order
and blocking BLAS adds a run's terms in, fused or not, every partial sum is the sum of a subset
of them, an integer within 2**24, so no step rounds. The runs' results are added in float64,
exact up to 2**53. ``bound`` is the largest magnitude of ``a - a_zero`` that the types and zero
points allow times the largest of ``b - b_zero``, read off the weights.

A product of a few rows (a recurrent step's, a decode step's) reads each weight once, so it is
bound by the weights' bytes rather than by arithmetic; it runs on a compiled dot-product loop
over the weights transposed as int16 (half float32's bytes; LLVM turns the int16 multiply-adds
into pmaddwd), with exact int32 sums.

The forms of a constant ``b`` (float32, or transposed int16, less its zero points) are made
once and kept while it lives (:mod:`.constant_forms`). Other shapes and types (batched ``b``,
16-bit values, zero points of other shapes) go through float64 BLAS, also exactly (a product of
16-bit values is below 2**32, a sum of fewer than 2**21 of them below 2**53).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from types import ModuleType

import numpy as np

from .constant_forms import constant_form
from .nn_common import matmul
from .threads import one_blas_thread, part_count, run_spans, thread_count

Array = np.ndarray
EIGHT_BIT = frozenset({np.dtype(np.int8), np.dtype(np.uint8)})
#: Every integer of magnitude up to this is a float32.
FLOAT32_EXACT = 1 << 24
#: Rows of ``a`` up to which the product runs on the compiled dot-product loop: from 4 rows on,
#: float32 GEMM (which reads each weight once for all rows) was as fast (512x2048 weights).
FEW_ROWS = 3
#: The longest product the dot-product loop sums in int32 without overflow (terms within 255**2).
DOT_DEPTH = (1 << 31) // (255 * 255)


def shifted(values: Array, zero_point: Array | None) -> Array:
    """Quantized values minus their zero point, as float64 (exact up to 32-bit integers)."""
    values = values.astype(np.float64)
    return values if zero_point is None else values - zero_point.astype(np.float64)


def integer_matmul(a: Array, b: Array, a_zero: Array | None, b_zero: Array | None) -> Array:
    """``(a - a_zero) @ (b - b_zero)`` exactly, in int32 (MatMulInteger's result).

    ``a_zero`` is a scalar, or one per row of a 2-D ``a``; ``b_zero`` a scalar or one per column.
    """
    return exact_product(a, b, a_zero, b_zero).astype(np.int32, copy=False)


def exact_product(a: Array, b: Array, a_zero: Array | None, b_zero: Array | None) -> Array:
    """``(a - a_zero) @ (b - b_zero)`` as exact integers, in whichever type computed them
    (float32, float64 or int32): converting it to float32 rounds as a Cast of the int32 would."""
    rows = a.shape[-2] if a.ndim >= 2 else 1
    a_zeros = _zeros(a_zero, rows, per_row_allowed=a.ndim == 2)
    b_zeros = _zeros(b_zero, b.shape[-1], per_row_allowed=True)
    eight_bit = a.dtype in EIGHT_BIT and b.dtype in EIGHT_BIT and b.ndim == 2 and a.ndim >= 1
    if not eight_bit or a_zeros is None or b_zeros is None:
        if a_zero is not None and a_zero.ndim == 1 and a_zero.size > 1:
            a_zero = a_zero[:, None]
        return matmul(shifted(a, a_zero), shifted(b, b_zero))
    flat = a.reshape(-1, a.shape[-1])
    if a_zeros.size == rows and rows > 1:
        a_zeros = np.tile(a_zeros, len(flat) // rows)
    info = np.iinfo(a.dtype)
    a_bound = max(info.max - int(a_zeros.min()), int(a_zeros.max()) - info.min)
    zeros = a_zeros.astype(np.float32)
    values = flat.astype(np.float32) - (zeros[:, None] if zeros.size > 1 else zeros)
    out = shifted_product(values, a_bound, b, b_zeros)
    return out.reshape(*a.shape[:-1], b.shape[1])


def shifted_product(
    values: Array, bound: int, b: Array, b_zeros: Array, origin: tuple[Array, Hashable] | None = None
) -> Array:
    """``values @ (b - b_zeros)`` exactly, for float32 ``values`` ``[M, K]`` holding integers of
    magnitude at most ``bound`` (an 8-bit operand less its zero point), 8-bit ``b`` ``[K, N]``
    and int32 ``b_zeros`` (one, or one per column).

    ``origin``: the array ``b`` is a part of and which part, to keep ``b``'s forms by (a view
    taken at every run is a new array each time)."""
    owner, part = origin or (b, None)
    if len(values) <= FEW_ROWS and values.shape[1] <= DOT_DEPTH:
        rows = _transposed(b, b_zeros, owner, part)
        return _dot_rows(values.astype(np.int16), rows)
    weights, weight_bound = _float_weights(b, b_zeros, owner, part)
    run = max(1, FLOAT32_EXACT // max(1, bound * weight_bound))
    return _blas_product(values, weights, run)


def _blas_product(values: Array, weights: Array, run: int) -> Array:
    """``values @ weights`` in runs of ``run`` terms (float32; added in float64 where there are
    several), the columns cut over the backend's threads, each part a GEMM on one BLAS thread:
    the sums are exact, so any cut gives the same bits, and OpenBLAS's own threads, which wait on
    the slowest half of a product, cost many times the product's time on a loaded machine."""
    depth, columns = values.shape[1], weights.shape[1]
    out = np.empty((len(values), columns), np.float32 if run >= depth else np.float64)
    threads = thread_count()
    parts = part_count(values.size * columns, columns, threads)

    def product(span: slice) -> None:
        target = out[:, span]
        if run >= depth:
            np.matmul(values, weights[:, span], out=target)
            return
        target[...] = 0
        for start in range(0, depth, run):
            target += np.matmul(values[:, start : start + run], weights[start : start + run, span])

    with one_blas_thread():
        run_spans(product, columns, parts, threads)
    return out


def zero_points(zero_point: Array | None, count: int) -> Array | None:
    """``b``'s zero point as ``count`` int32 values (or one, broadcast), None where its shape is
    not a scalar or one per column."""
    return _zeros(zero_point, count, per_row_allowed=True)


def _float_weights(b: Array, zeros: Array, owner: Array, part: Hashable) -> tuple[Array, int]:
    """``b - zeros`` in float32 (exact: integers within 255) and the largest magnitude in it."""

    def make() -> tuple[Array, int]:
        weights = b.astype(np.float32) - zeros.astype(np.float32)
        return weights, int(np.abs(weights).max(initial=0))

    return constant_form(owner, ("float32", part, zeros.tobytes()), make)


def _transposed(b: Array, zeros: Array, owner: Array, part: Hashable) -> Array:
    """``(b - zeros)^T`` in int16, each column of ``b`` a contiguous row."""

    def make() -> Array:
        return np.ascontiguousarray((b.astype(np.int16) - zeros.astype(np.int16)).T)

    return constant_form(owner, ("int16 rows", part, zeros.tobytes()), make)


def _dot_rows(values: Array, rows: Array) -> Array:
    """``values @ rows^T`` in int32 on the compiled loop, the columns cut over the threads."""
    out = np.empty((len(values), len(rows)), np.int32)
    threads = thread_count()
    parts = part_count(values.size * len(rows), len(rows), threads)
    loop = _loops().dot_rows
    run_spans(lambda span: loop(values, rows, out, span.start, span.stop), len(rows), parts, threads)
    return out


def _zeros(zero_point: Array | None, count: int, per_row_allowed: bool) -> Array | None:
    """The zero point as ``count`` int32 values (or one, broadcast), None where its shape is not one
    the 8-bit products take."""
    if zero_point is None:
        return np.zeros(1, np.int32)
    if zero_point.size == 1:
        return np.full(1, int(zero_point.reshape(-1)[0]), np.int32)
    if per_row_allowed and zero_point.ndim == 1 and zero_point.size == count:
        return zero_point.astype(np.int32)
    return None


@functools.cache
def _loops() -> ModuleType:
    """The compiled loop, imported on first use (numba takes a while to import)."""
    from . import integer_product_loops

    return integer_product_loops
