"""Normalization over channels: batch normalization with given statistics, group normalization
(instance normalization is its one-channel-per-group case) and local response normalization."""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, f32, i32, u32
from ..lang import (
    Buffer,
    Const,
    ReadBuffer,
    T,
    barrier,
    global_id,
    group_id,
    local_id,
    pow,
    rsqrt,
    shared,
    sqrt,
)


@kernel(workgroup=(64,))
def batch_norm(
    x: ReadBuffer[T],
    scale: ReadBuffer[T],
    bias: ReadBuffer[T],
    mean: ReadBuffer[T],
    variance: ReadBuffer[T],
    y: Buffer[T],
    n: u32,
    width: u32,
    C: u32,
    inner: u32,
    epsilon: f32,
    T: Const[Scalar],
):
    """``y = (x - mean) * scale / sqrt(variance + epsilon) + bias`` per channel of ``(N, C, inner)``."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        c = (i // inner) % C
        y[i] = (x[i] - mean[c]) * (scale[c] / sqrt(variance[c] + T(epsilon))) + bias[c]


@kernel(workgroup=("BLOCK",))
def group_norm(
    x: ReadBuffer[T],
    scale: ReadBuffer[T],
    bias: ReadBuffer[T],
    y: Buffer[T],
    rows: u32,
    across: u32,
    G: u32,
    channels: u32,
    inner: u32,
    share: u32,
    epsilon: f32,
    T: Const[Scalar],
    BLOCK: Const[int],
):
    """Standardize each of the ``rows = N * G`` groups of ``channels * inner`` contiguous values,
    then scale and shift per channel (``scale[c // share]``: ``share`` channels per entry).

    One workgroup of ``BLOCK`` threads (a power of two) per group, mean first and then the
    centred variance; launch ``(across, ceil(rows / across))`` workgroups.
    """
    tile = shared(T, BLOCK)
    row = group_id(1) * across + group_id(0)
    r = min(row, rows - 1)
    size = channels * inner
    base = r * size
    lid = local_id(0)
    part = T(0)
    for k in range(lid, size, BLOCK):
        part += x[base + k]
    tile[lid] = part
    barrier()
    stride = u32(BLOCK // 2)
    while stride > 0:
        if lid < stride:
            tile[lid] += tile[lid + stride]
        barrier()
        stride = stride // 2
    mean = tile[0] / T(size)
    barrier()
    part = T(0)
    for k in range(lid, size, BLOCK):
        centred = x[base + k] - mean
        part += centred * centred
    tile[lid] = part
    barrier()
    stride = u32(BLOCK // 2)
    while stride > 0:
        if lid < stride:
            tile[lid] += tile[lid + stride]
        barrier()
        stride = stride // 2
    inv = rsqrt(tile[0] / T(size) + T(epsilon))
    first = (r % G) * channels
    if row < rows:
        for k in range(lid, size, BLOCK):
            c = (first + k // inner) // share
            y[base + k] = (x[base + k] - mean) * inv * scale[c] + bias[c]


@kernel(workgroup=(64,))
def local_response_norm(
    x: ReadBuffer[T],
    y: Buffer[T],
    n: u32,
    width: u32,
    C: u32,
    inner: u32,
    size: u32,
    alpha: f32,
    beta: f32,
    bias: f32,
    T: Const[Scalar],
):
    """``y = x / (bias + alpha / size * sum of x^2 over the size channels around it) ** beta`` on
    ``(N, C, inner)``; the window reaches ``(size - 1) // 2`` channels back."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        c = i32((i // inner) % C)
        first = i - u32(c) * inner
        before = i32((size - u32(1)) // u32(2))
        total = f32(0)
        for k in range(c - before, c - before + i32(size)):
            if k >= 0 and k < i32(C):
                v = f32(x[first + u32(k) * inner])
                total += v * v
        scale = f32(bias) + f32(alpha) / f32(size) * total
        y[i] = T(f32(x[i]) / pow(scale, f32(beta)))
