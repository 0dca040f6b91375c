"""Data movement: strided copies (transpose, slice, expand, concat), gathers along an axis and
sequence reversal."""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, i32, u32
from ..lang import Buffer, Const, ReadBuffer, global_id


@kernel(workgroup=(64,))
def strided_copy(
    x: ReadBuffer[T],  # noqa: F821
    out: Buffer[T],  # noqa: F821
    dims: ReadBuffer[u32],
    n: u32,
    width: u32,
    src_offset: u32,
    dst_offset: u32,
    T: Const[Scalar],
    RANK: Const[int],
):
    """Copy ``n`` elements of a strided view; ``dims`` = shape, source strides, destination strides.

    Strides are u32 and may be negative in two's complement: the sums wrap back into range.
    """
    i = global_id(1) * width + global_id(0)
    if i < n:
        rest = i
        src = src_offset
        dst = dst_offset
        for d in range(RANK - 1, -1, -1):
            coord = rest % dims[d]
            rest = rest // dims[d]
            src += coord * dims[RANK + d]
            dst += coord * dims[2 * RANK + d]
        out[dst] = x[src]


@kernel(workgroup=(64,))
def gather(
    data: ReadBuffer[T],  # noqa: F821
    indices: ReadBuffer[i32],
    out: Buffer[T],  # noqa: F821
    n: u32,
    width: u32,
    inner: u32,
    count: u32,
    axis_dim: i32,
    T: Const[Scalar],
):
    """``out[o, j, k] = data[o, indices[j], k]``: ``count`` indices (negative from the end), ``inner``."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        k = i % inner
        j = (i // inner) % count
        o = i // (inner * count)
        index = indices[j]
        if index < 0:
            index += axis_dim
        out[i] = data[(o * u32(axis_dim) + u32(index)) * inner + k]


@kernel(workgroup=(64,))
def reverse_sequence(
    x: ReadBuffer[T],  # noqa: F821
    lengths: ReadBuffer[i32],
    out: Buffer[T],  # noqa: F821
    n: u32,
    width: u32,
    time_size: u32,
    time_stride: u32,
    batch_size: u32,
    batch_stride: u32,
    T: Const[Scalar],
):
    """``out`` is ``x`` with the first ``lengths[b]`` steps of each batch item ``b`` reversed along
    the time axis; the axes' sizes and strides locate an element's step and item."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        t = (i // time_stride) % time_size
        b = (i // batch_stride) % batch_size
        length = u32(lengths[b])
        source = i
        if t < length:
            source = i + (length - u32(1) - t) * time_stride - t * time_stride
        out[i] = x[source]
