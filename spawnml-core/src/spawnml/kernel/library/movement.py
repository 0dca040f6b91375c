"""Data movement: strided copies (transpose, slice, expand, concat) and gathers along an axis."""

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
