"""Normalization over channels: batch normalization with given statistics, and group
normalization (instance normalization is its one-channel-per-group case)."""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, f32, u32
from ..lang import Buffer, Const, ReadBuffer, barrier, global_id, group_id, local_id, rsqrt, shared, sqrt


@kernel(workgroup=(64,))
def batch_norm(
    x: ReadBuffer[T],  # noqa: F821
    scale: ReadBuffer[T],  # noqa: F821
    bias: ReadBuffer[T],  # noqa: F821
    mean: ReadBuffer[T],  # noqa: F821
    variance: ReadBuffer[T],  # noqa: F821
    y: Buffer[T],  # noqa: F821
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
    x: ReadBuffer[T],  # noqa: F821
    scale: ReadBuffer[T],  # noqa: F821
    bias: ReadBuffer[T],  # noqa: F821
    y: Buffer[T],  # noqa: F821
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
