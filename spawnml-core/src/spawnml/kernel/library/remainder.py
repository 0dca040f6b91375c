"""Integer arithmetic the elementwise chains cannot express: the exact floating-point remainder
(Mod on float tensors) and integer powers.

``a - b * trunc(a / b)`` rounds; instead each thread divides ``|a|`` by ``|b|`` the long way:
it subtracts the largest ``|b| * 2**k`` that fits, halving, until less than ``|b|`` is left. Each
subtraction is exact (Sterbenz: the two are within a factor of two), so the result is C's
``fmod``; with ``FMOD`` off a non-zero result of the other sign than ``b`` takes ``b`` added,
as numpy's ``mod`` does. A zero divisor, an infinite dividend or a NaN operand gives NaN.
Operands broadcast like :func:`~spawnml.kernel.library.map.map2`'s; launch ``n`` threads over a
2-D grid of ``width`` threads per grid row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, global_id


@kernel(workgroup=(64,))
def float_mod(
    x: ReadBuffer[T],
    y: ReadBuffer[T],
    out: Buffer[T],
    dims: ReadBuffer[u32],
    n: u32,
    width: u32,
    T: Const[Scalar],
    LARGEST: Const[float],
    RANK: Const[int],
    FMOD: Const[bool],
):
    """``out[i] = x[.] mod y[.]``; ``dims`` = out shape, x strides, y strides; ``LARGEST`` is ``T``'s
    largest finite value."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        rest = i
        ix = u32(0)
        iy = u32(0)
        for d in range(RANK - 1, -1, -1):
            coord = rest % dims[d]
            rest = rest // dims[d]
            ix += coord * dims[RANK + d]
            iy += coord * dims[2 * RANK + d]
        a = x[ix]
        b = y[iy]
        left = abs(a)
        divisor = abs(b)
        if divisor > T(0) and left >= divisor and left <= LARGEST:
            step = divisor
            while step <= left * T(0.5):
                step = step * T(2)
            while left >= divisor:
                if left >= step:
                    left = left - step
                step = step * T(0.5)
        result = -left if a < T(0) else left
        if not divisor > T(0) or abs(a) > LARGEST:  # a zero or NaN divisor, an infinite dividend
            result = (a - a) / (b - b)  # NaN, computed: there is no NaN literal
        if not FMOD and result != T(0) and (b < T(0)) != (result < T(0)):
            result = result + b
        out[i] = result


@kernel(workgroup=(64,))
def integer_power(
    x: ReadBuffer[i32],
    y: ReadBuffer[i32],
    out: Buffer[i32],
    dims: ReadBuffer[u32],
    n: u32,
    width: u32,
    RANK: Const[int],
):
    """``out[i] = x[.] ** y[.]`` in wrapping int32 by repeated squaring; a negative exponent gives
    0, or ±1 for a base of ±1, as C's integer ``pow`` truncates. Broadcasting as in :func:`float_mod`."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        rest = i
        ix = u32(0)
        iy = u32(0)
        for d in range(RANK - 1, -1, -1):
            coord = rest % dims[d]
            rest = rest // dims[d]
            ix += coord * dims[RANK + d]
            iy += coord * dims[2 * RANK + d]
        base = x[ix]
        exponent = y[iy]
        result = 1
        if exponent < 0:
            result = 0
            if base == 1:
                result = 1
            if base == -1:
                result = -1 if exponent % 2 != 0 else 1
        else:
            while exponent > 0:
                if exponent % 2 == 1:
                    result = result * base
                base = base * base
                exponent = exponent // 2
        out[i] = result
