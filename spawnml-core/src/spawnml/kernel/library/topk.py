"""TopK: the ``K`` largest (or smallest) elements of each row, in order, with their indices.

One thread per row of ``D`` elements ``inner`` apart. The ``t``-th result is the best element
that ranks after the ``(t - 1)``-th, in the order of value and then of index (equal values keep
the lower index first, as ONNX asks), so no element is chosen twice and no scratch memory is
needed: ``K`` passes over the row. Launch ``rows`` threads over a 2-D grid of ``width`` threads
per grid row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, global_id


@kernel(workgroup=(64,))
def top_k(
    x: ReadBuffer[T],
    values: Buffer[T],
    indices: Buffer[i32],
    rows: u32,
    width: u32,
    D: u32,
    K: u32,
    inner: u32,
    T: Const[Scalar],
    LARGEST: Const[bool],
):
    """``values`` and ``indices`` hold ``K`` results per row, ``inner`` apart like the input."""
    r = global_id(1) * width + global_id(0)
    if r < rows:
        outer = r // inner
        base = outer * D * inner + r % inner
        out = outer * K * inner + r % inner
        last = x[base]
        last_index = i32(-1)
        for t in range(K):
            best = x[base]
            best_index = i32(-1)
            for j in range(D):
                v = x[base + j * inner]
                index = i32(j)
                behind = v < last if LARGEST else v > last
                after = last_index < 0 or behind or (v == last and index > last_index)
                beats = v > best if LARGEST else v < best
                better = best_index < 0 or beats or (v == best and index < best_index)
                if after and better:
                    best = v
                    best_index = index
            values[out + t * inner] = best
            indices[out + t * inner] = best_index
            last = best
            last_index = best_index
