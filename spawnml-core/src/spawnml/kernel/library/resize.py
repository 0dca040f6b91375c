"""Resampling along one axis from precomputed taps (Resize: nearest, linear, cubic)."""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, f32, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, global_id


@kernel(workgroup=(64,))
def resample_axis(
    x: ReadBuffer[T],
    index: ReadBuffer[i32],
    weight: ReadBuffer[f32],
    y: Buffer[T],
    n: u32,
    width: u32,
    size: u32,
    out: u32,
    inner: u32,
    T: Const[Scalar],
    TAPS: Const[int],
):
    """``(outer, size, inner)`` to ``(outer, out, inner)``: output position ``j`` is the sum over
    ``t < TAPS`` of ``weight[t, j] * x[.., index[t, j], ..]`` (``index``, ``weight`` are ``(TAPS, out)``).

    Nearest is one tap of weight 1, which copies the value exactly.
    """
    i = global_id(1) * width + global_id(0)
    if i < n:
        k = i % inner
        j = (i // inner) % out
        base = (i // (inner * out)) * size
        acc = T(weight[j]) * x[(base + u32(index[j])) * inner + k]
        for t in range(1, TAPS):
            tap = u32(t) * out + j
            acc += T(weight[tap]) * x[(base + u32(index[tap])) * inner + k]
        y[i] = acc
