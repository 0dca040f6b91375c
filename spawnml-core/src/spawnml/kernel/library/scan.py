"""Row-wise kernels beyond softmax: log-softmax, hardmax, cumulative sums and products, one thread per row.

A row is ``D`` elements ``inner`` apart; row ``r`` starts at ``(r // inner) * D * inner + r % inner``.
Launch ``rows`` threads over a 2-D grid of ``width`` threads per grid row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, u32
from ..lang import Buffer, Const, ReadBuffer, T, exp, global_id, log


@kernel(workgroup=(64,))
def log_softmax_rows(
    x: ReadBuffer[T],
    out: Buffer[T],
    rows: u32,
    width: u32,
    D: u32,
    inner: u32,
    T: Const[Scalar],
):
    """``out = x - max - log(sum(exp(x - max)))`` along each row."""
    r = global_id(1) * width + global_id(0)
    if r < rows:
        base = (r // inner) * D * inner + r % inner
        top = x[base]
        for k in range(1, D):
            top = max(top, x[base + k * inner])
        total = T(0)
        for k in range(D):
            total += exp(x[base + k * inner] - top)
        shift = top + log(total)
        for k in range(D):
            out[base + k * inner] = x[base + k * inner] - shift


@kernel(workgroup=(64,))
def hardmax_rows(
    x: ReadBuffer[T],
    out: Buffer[T],
    rows: u32,
    width: u32,
    D: u32,
    inner: u32,
    T: Const[Scalar],
):
    """1 at the first largest element of each row, 0 elsewhere."""
    r = global_id(1) * width + global_id(0)
    if r < rows:
        base = (r // inner) * D * inner + r % inner
        best = u32(0)
        for k in range(1, D):
            if x[base + k * inner] > x[base + best * inner]:
                best = k
        for k in range(D):
            out[base + k * inner] = T(1) if k == best else T(0)


@kernel(workgroup=(64,))
def cumulative_rows(
    x: ReadBuffer[T],
    out: Buffer[T],
    rows: u32,
    width: u32,
    D: u32,
    inner: u32,
    T: Const[Scalar],
    PRODUCT: Const[bool],
    EXCLUSIVE: Const[bool],
    REVERSE: Const[bool],
):
    """Running sums (or products) along each row, from its end when ``REVERSE``, without the
    element itself when ``EXCLUSIVE``."""
    r = global_id(1) * width + global_id(0)
    if r < rows:
        base = (r // inner) * D * inner + r % inner
        total = T(1) if PRODUCT else T(0)
        for j in range(D):
            k = D - 1 - j if REVERSE else j
            value = x[base + k * inner]
            if EXCLUSIVE:
                out[base + k * inner] = total
            total = total * value if PRODUCT else total + value
            if not EXCLUSIVE:
                out[base + k * inner] = total
