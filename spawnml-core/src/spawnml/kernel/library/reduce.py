"""Reductions through workgroup memory."""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, u32
from ..lang import Buffer, Const, ReadBuffer, T, barrier, global_id, group_id, local_id, shared


@kernel(workgroup=("BLOCK",))
def sum_partial(x: ReadBuffer[T], partial: Buffer[T], n: u32, T: Const[Scalar], BLOCK: Const[int]):
    """``partial[g]`` = the sum of workgroup ``g``'s ``BLOCK`` elements (``BLOCK`` a power of two).

    Launch ``ceil(n / BLOCK)`` workgroups; sum ``partial`` again until one value is left.
    """
    tile = shared(T, BLOCK)
    i = global_id(0)
    lid = local_id(0)
    tile[lid] = x[i] if i < n else T(0)
    barrier()
    stride = u32(BLOCK // 2)
    while stride > 0:
        if lid < stride:
            tile[lid] += tile[lid + stride]
        barrier()
        stride = stride // 2
    if lid == 0:
        partial[group_id(0)] = tile[0]
