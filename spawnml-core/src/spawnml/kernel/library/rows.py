"""Row-wise kernels: one thread per row, for softmax and layer and RMS normalization.

A row is ``D`` elements ``inner`` apart; row ``r`` starts at ``(r // inner) * D * inner + r % inner``.
Launch ``rows`` threads over a 2-D grid of ``width`` threads per grid row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, f32, u32
from ..lang import Buffer, Const, ReadBuffer, T, exp, global_id, rsqrt


@kernel(workgroup=(64,))
def softmax_rows(
    x: ReadBuffer[T],
    out: Buffer[T],
    rows: u32,
    width: u32,
    D: u32,
    inner: u32,
    T: Const[Scalar],
):
    """``out = exp(x - max) / sum(exp(x - max))`` along each row."""
    r = global_id(1) * width + global_id(0)
    if r < rows:
        base = (r // inner) * D * inner + r % inner
        top = x[base]
        for k in range(1, D):
            top = max(top, x[base + k * inner])
        total = T(0)
        for k in range(D):
            e = exp(x[base + k * inner] - top)
            out[base + k * inner] = e
            total += e
        for k in range(D):
            out[base + k * inner] = out[base + k * inner] / total


@kernel(workgroup=(64,))
def layernorm_rows(
    x: ReadBuffer[T],
    scale: ReadBuffer[T],
    bias: ReadBuffer[T],
    out: Buffer[T],
    mean_out: Buffer[T],
    inv_std_out: Buffer[T],
    rows: u32,
    width: u32,
    D: u32,
    epsilon: f32,
    T: Const[Scalar],
    CENTERED: Const[bool],
):
    """``out = (x - mean) / sqrt(var + epsilon) * scale + bias`` over contiguous rows of ``D``, with
    each row's mean and ``1 / sqrt(var + epsilon)``; not ``CENTERED``, the mean is taken as 0 (RMS
    normalization: ``x / sqrt(mean(x * x) + epsilon) * scale + bias``)."""
    r = global_id(1) * width + global_id(0)
    if r < rows:
        base = r * D
        mean = T(0)
        if CENTERED:
            total = T(0)
            for k in range(D):
                total += x[base + k]
            mean = total / T(D)
        spread = T(0)
        for k in range(D):
            centred = x[base + k] - mean
            spread += centred * centred
        inv = rsqrt(spread / T(D) + T(epsilon))
        mean_out[r] = mean
        inv_std_out[r] = inv
        for k in range(D):
            out[base + k] = (x[base + k] - mean) * inv * scale[k] + bias[k]
