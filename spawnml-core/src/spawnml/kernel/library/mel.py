"""MelWeightMatrix: the triangular filters of a mel filter bank, one thread per weight.

``edges`` holds the ``bins + 2`` spectrogram bins the filters' corners fall on; weight
``(row, m)`` rises from ``edges[m]`` to 1 at ``edges[m + 1]`` and falls to ``edges[m + 2]``.
Launch ``n`` threads over a 2-D grid of ``width`` threads per grid row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, global_id


@kernel(workgroup=(64,))
def mel_weights(
    edges: ReadBuffer[i32],
    out: Buffer[T],
    n: u32,
    width: u32,
    bins: u32,
    T: Const[Scalar],
    W: Const[Scalar],
):
    """``out`` is ``(rows, bins)``: each filter's weight of each spectrogram row, computed in the
    float type ``W`` and stored as ``T``."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        m = i % bins
        row = i32(i // bins)
        left = edges[m]
        center = edges[m + u32(1)]
        right = edges[m + u32(2)]
        weight = W(0)
        if row == center:
            weight = W(1)
        elif left <= row and row < center:
            weight = W(row - left) / W(max(center - left, 1))
        elif center < row and row < right:
            weight = W(right - row) / W(max(right - center, 1))
        out[i] = T(weight)
