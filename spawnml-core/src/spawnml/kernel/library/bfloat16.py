"""Rounding to bfloat16 precision, for tensors of bfloat16 held as float32.

bfloat16 keeps float32's exponent range and 8 significant bits. Each thread scales its value by
a power of two into ``[2**-32, 2**32)``, finds the binade there, and rounds to a multiple of the
binade's bfloat16 spacing (ties to even) with exact float32 arithmetic: every scaling is by a
power of two, and the quotient by the spacing is an integer below 2**9 once rounded. Past the
largest bfloat16 the product overflows to infinity, as the cast does; NaN stays NaN and a zero
keeps its sign. float32 subnormals are left to the device (GPUs may flush them). Launch ``n``
threads over a 2-D grid of ``width`` threads per grid row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, f32, u32
from ..lang import Buffer, Const, ReadBuffer, T, floor, global_id

#: Scaled magnitudes lie in ``[LOW, HIGH)``; three steps of ``2**32`` reach every float32.
HIGH = 4294967296.0
LOW = 1.0 / HIGH


@kernel(workgroup=(64,))
def round_to_bfloat16(x: ReadBuffer[T], out: Buffer[f32], n: u32, width: u32, T: Const[Scalar]):
    """``out[i]`` = ``x[i]`` as float32, rounded to the nearest bfloat16 value."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        v = f32(x[i])
        size = abs(v)
        scale = f32(1)
        for _scaling in range(3):  # three scalings of 2**32 reach every float32
            if size * scale >= HIGH:
                scale = scale * LOW
            if size * scale < LOW and size != f32(0):
                scale = scale * HIGH
        scaled = size * scale
        bound = HIGH * 0.5
        spacing = f32(16777216.0)  # 2**24: the spacing of the binade [2**31, 2**32)
        while bound > scaled and bound > LOW:
            bound = bound * 0.5
            spacing = spacing * 0.5
        spacing = spacing / scale
        q = v / spacing
        r = floor(q + 0.5)
        if r - q == f32(0.5) and r - f32(2) * floor(r * f32(0.5)) != f32(0):
            r = r - f32(1)  # a tie rounds to the even neighbour
        rounded = r * spacing
        out[i] = v * f32(0) if rounded == f32(0) else rounded
