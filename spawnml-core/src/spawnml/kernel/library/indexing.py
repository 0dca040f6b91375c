"""Index arithmetic kernels: GatherElements, Tile and Trilu.

Each thread computes one output element from its coordinates, decoded against the output
shape in ``dims``. Launch over a 2-D grid of ``width`` threads per grid row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, global_id


@kernel(workgroup=(64,))
def gather_elements(
    data: ReadBuffer[T],
    indices: ReadBuffer[i32],
    out: Buffer[T],
    dims: ReadBuffer[u32],
    n: u32,
    width: u32,
    axis: u32,
    axis_dim: i32,
    T: Const[Scalar],
    RANK: Const[int],
):
    """``out[c] = data[c with c[axis] = indices[c]]``; ``dims`` = indices' shape, data's strides."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        index = indices[i]
        if index < 0:
            index += axis_dim
        rest = i
        src = u32(0)
        for d in range(RANK - 1, -1, -1):
            coord = rest % dims[d]
            rest = rest // dims[d]
            if u32(d) == axis:
                coord = u32(index)
            src += coord * dims[RANK + d]
        out[i] = data[src]


@kernel(workgroup=(64,))
def tile(
    x: ReadBuffer[T],
    out: Buffer[T],
    dims: ReadBuffer[u32],
    n: u32,
    width: u32,
    T: Const[Scalar],
    RANK: Const[int],
):
    """``out[c] = x[c % x.shape]``; ``dims`` = the output's shape, the input's shape and strides."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        rest = i
        src = u32(0)
        for d in range(RANK - 1, -1, -1):
            coord = rest % dims[d]
            rest = rest // dims[d]
            src += (coord % dims[RANK + d]) * dims[2 * RANK + d]
        out[i] = x[src]


@kernel(workgroup=(64,))
def trilu(
    x: ReadBuffer[T],
    out: Buffer[T],
    n: u32,
    width: u32,
    rows: u32,
    cols: u32,
    diagonal: i32,
    T: Const[Scalar],
    UPPER: Const[bool],
):
    """The upper (``col - row >= diagonal``) or lower (``col - row <= diagonal``) triangle of each matrix."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        col = i32(i % cols)
        row = i32((i // cols) % rows)
        keep = col - row >= diagonal if UPPER else col - row <= diagonal
        out[i] = x[i] if keep else T(0)


@kernel(workgroup=(64,))
def gather_nd(
    data: ReadBuffer[T],
    indices: ReadBuffer[i32],
    out: Buffer[T],
    dims: ReadBuffer[u32],
    n: u32,
    width: u32,
    inner: u32,
    per_batch: u32,
    batch_stride: u32,
    T: Const[Scalar],
    K: Const[int],
):
    """GatherND: index tuple ``o`` of ``K`` values picks a slice of ``inner`` elements in its batch;
    ``dims`` = the ``K`` indexed dimensions, then their strides."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        o = i // inner
        src = (o // per_batch) * batch_stride + i % inner
        for j in range(u32(K)):
            index = indices[o * u32(K) + j]
            if index < 0:
                index += i32(dims[j])
            src += u32(index) * dims[u32(K) + j]
        out[i] = data[src]


@kernel(workgroup=(64,))
def scatter_nd(
    out: Buffer[T],
    indices: ReadBuffer[i32],
    updates: ReadBuffer[T],
    dims: ReadBuffer[u32],
    n: u32,
    width: u32,
    count: u32,
    T: Const[Scalar],
    K: Const[int],
    REDUCTION: Const[int],
):
    """ScatterND into ``out`` (a copy of the data): thread ``e`` applies element ``e`` of each of the
    ``count`` update slices in order, so repeated indices reduce deterministically without atomics.
    ``REDUCTION``: 0 none, 1 add, 2 mul, 3 max, 4 min; ``dims`` = the ``K`` indexed dims, their strides."""
    e = global_id(1) * width + global_id(0)
    if e < n:
        for u in range(count):
            dst = e
            for j in range(u32(K)):
                index = indices[u * u32(K) + j]
                if index < 0:
                    index += i32(dims[j])
                dst += u32(index) * dims[u32(K) + j]
            value = updates[u * n + e]
            if REDUCTION == 1:
                value += out[dst]
            if REDUCTION == 2:
                value *= out[dst]
            if REDUCTION == 3:
                value = max(value, out[dst])
            if REDUCTION == 4:
                value = min(value, out[dst])
            out[dst] = value


@kernel(workgroup=(64,))
def scatter_elements(
    out: Buffer[T],
    indices: ReadBuffer[i32],
    updates: ReadBuffer[T],
    dims: ReadBuffer[u32],
    n: u32,
    width: u32,
    inner: u32,
    length: u32,
    axis: u32,
    axis_dim: i32,
    T: Const[Scalar],
    RANK: Const[int],
    REDUCTION: Const[int],
):
    """ScatterElements into ``out`` (a copy of the data): thread ``t`` walks the ``length`` updates
    along the axis that share its other coordinates, the only ones that can collide, in order.
    ``REDUCTION`` as for :func:`scatter_nd`; ``dims`` = the updates' shape, the data's strides."""
    t = global_id(1) * width + global_id(0)
    if t < n:
        o = t // inner
        e = t % inner
        for j in range(length):
            pos = (o * length + j) * inner + e
            index = indices[pos]
            if index < 0:
                index += axis_dim
            rest = pos
            dst = u32(0)
            for d in range(RANK - 1, -1, -1):
                coord = rest % dims[d]
                rest = rest // dims[d]
                if u32(d) == axis:
                    coord = u32(index)
                dst += coord * dims[RANK + d]
            value = updates[pos]
            if REDUCTION == 1:
                value += out[dst]
            if REDUCTION == 2:
                value *= out[dst]
            if REDUCTION == 3:
                value = max(value, out[dst])
            if REDUCTION == 4:
                value = min(value, out[dst])
            out[dst] = value
