"""Small dense linear algebra: the determinant of a batch of square matrices, one thread each.

Gaussian elimination with partial pivoting, in place on a scratch copy of the matrices (``a``);
the determinant is the product of the pivots, negated at each row swap. Launch ``rows`` threads
(one per matrix) over a 2-D grid of ``width`` threads per grid row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, f32, u32
from ..lang import Buffer, Const, T, global_id


@kernel(workgroup=(64,))
def determinant(a: Buffer[f32], out: Buffer[T], rows: u32, width: u32, N: u32, T: Const[Scalar]):
    """``out[r]`` = the determinant of the ``N x N`` row-major matrix ``r`` of ``a`` (overwritten)."""
    r = global_id(1) * width + global_id(0)
    if r < rows:
        base = r * N * N
        det = f32(1)
        for col in range(N):
            pivot = col
            best = abs(a[base + col * N + col])
            for row in range(col + u32(1), N):
                if abs(a[base + row * N + col]) > best:
                    best = abs(a[base + row * N + col])
                    pivot = row
            if pivot != col:
                det = -det
                for k in range(N):
                    held = a[base + col * N + k]
                    a[base + col * N + k] = a[base + pivot * N + k]
                    a[base + pivot * N + k] = held
            head = a[base + col * N + col]
            det = det * head
            if head != f32(0):
                for row in range(col + u32(1), N):
                    factor = a[base + row * N + col] / head
                    for k in range(col, N):
                        a[base + row * N + k] = a[base + row * N + k] - factor * a[base + col * N + k]
        out[r] = T(det)
