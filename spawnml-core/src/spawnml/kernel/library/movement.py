"""Data movement: strided copies (transpose, slice, expand, concat), gathers along an axis,
sequence reversal and Col2Im's gathering of image patches."""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, global_id


@kernel(workgroup=(64,))
def strided_copy(
    x: ReadBuffer[T],
    out: Buffer[T],
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
    data: ReadBuffer[T],
    indices: ReadBuffer[i32],
    out: Buffer[T],
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
    x: ReadBuffer[T],
    lengths: ReadBuffer[i32],
    out: Buffer[T],
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


@kernel(workgroup=(64,))
def col2im(
    x: ReadBuffer[T],
    dims: ReadBuffer[u32],
    out: Buffer[T],
    n: u32,
    width: u32,
    C: u32,
    image: u32,
    window: u32,
    blocks: u32,
    T: Const[Scalar],
    RANK: Const[int],
):
    """Col2Im: ``out[n, c, p]`` sums the columns ``x[n, c * window + k, b]`` of every kernel offset
    ``k`` whose block ``b`` covers pixel ``p`` (``image`` pixels, ``window`` offsets and ``blocks``
    blocks in all). ``dims`` holds, ``RANK`` each: the image shape, the blocks per axis, the kernel
    shape, the strides, the dilations and the leading pads."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        c = (i // image) % C
        item = i // (image * C)
        total = T(0)
        for k in range(window):
            rest_k = k
            rest_p = i % image
            block = u32(0)
            scale = u32(1)
            inside = True
            for d in range(RANK - 1, -1, -1):
                offset = i32(rest_k % dims[2 * RANK + d])
                rest_k = rest_k // dims[2 * RANK + d]
                pixel = i32(rest_p % dims[d])
                rest_p = rest_p // dims[d]
                q = pixel + i32(dims[5 * RANK + d]) - offset * i32(dims[4 * RANK + d])
                stride = i32(dims[3 * RANK + d])
                if q < 0 or q % stride != 0 or q // stride >= i32(dims[RANK + d]):
                    inside = False
                else:
                    block += u32(q // stride) * scale
                scale = scale * dims[RANK + d]
            if inside:
                total += x[((item * C + c) * window + k) * blocks + block]
        out[i] = total
