"""Padding (and cropping, for negative pads) of a tensor of any rank."""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, global_id

#: The values of ``MODE``: how a coordinate outside the input is mapped.
CONSTANT, REFLECT, EDGE, WRAP = 0, 1, 2, 3


@kernel(workgroup=(64,))
def pad(
    x: ReadBuffer[T],
    value: ReadBuffer[T],
    y: Buffer[T],
    dims: ReadBuffer[i32],
    n: u32,
    width: u32,
    T: Const[Scalar],
    RANK: Const[int],
    MODE: Const[int],
):
    """``dims`` = output shape, input shape, begin pads. Outside the input, ``CONSTANT`` writes
    ``value[0]``, ``REFLECT`` mirrors without repeating the edge, ``EDGE`` repeats the edge
    and ``WRAP`` continues from the other side."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        rest = i32(i)
        src = 0
        step = 1
        inside = True
        for d in range(RANK - 1, -1, -1):
            size = dims[RANK + d]
            c = rest % dims[d] - dims[2 * RANK + d]
            rest = rest // dims[d]
            if MODE == REFLECT:
                period = max(2 * size - 2, 1)
                c = abs(c) % period
                if c >= size:
                    c = period - c
            elif MODE == EDGE:
                c = min(max(c, 0), size - 1)
            elif MODE == WRAP:
                c = (c % size + size) % size
            elif c < 0 or c >= size:
                inside = False
            src += c * step
            step *= size
        if inside:
            y[i] = x[src]
        else:
            y[i] = value[0]
