"""float32 exp, tanh, sigmoid and erf that LLVM vectorizes, for numba-compiled elementwise loops.

numba compiles ``np.exp`` and ``math.erf`` to one libm call per element, and LLVM vectorizes a
loop holding such a call only where it knows a vector math library (SVML, libmvec), which
numba's llvmlite does not offer. These functions are branch-free float32 arithmetic instead
(range reduction, a polynomial, integer bit tricks for powers of two, selects for the special
values), so a loop calling them vectorizes. Each is inlined into its caller.

Maximum errors, measured against float64 references (numpy's exp and tanh, ``math.erf``) over
every float32 value, in float32 ULPs of the exact result (subnormal ULPs below the normal range;
see ``docs/performance.md``):

- :func:`exp`: 1.03 ULP, subnormal results included; ``inf`` where the result overflows.
- :func:`sigmoid`: 2.4 ULP over the whole range: ``exp(x) / (1 + exp(x))`` below 0, so results
  down to subnormals keep their digits (float32 ``1 / (1 + exp(-x))`` gives 0 below -88.7).
- :func:`tanh`: 1.33 ULP.
- :func:`erf`: 4.5e-7 absolute (Eigen's rational approximation); 4.01 ULP below 1, up to
  7.5 ULP of 1 near 3.9, where erf rounds to ±1.

NaN gives NaN, ``±inf`` the limits, ``-0`` gives ``exp(-0) = 1``, ``tanh(-0) = erf(-0) = -0``
and ``sigmoid(-0) = 0.5``, as numpy does. Every element is computed by the same operations
whether the loop runs it in a vector or alone, so results do not depend on how a pass is cut.
"""

from __future__ import annotations

import typing
from collections.abc import Callable

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

F = np.float32
I32 = np.int32
_FLOAT = ir.FloatType()


def _fma(typingctx, a, b, c):
    signature = types.float32(types.float32, types.float32, types.float32)

    def codegen(context, builder, sig, args):
        fn_type = ir.FunctionType(_FLOAT, [_FLOAT] * 3)
        return builder.call(cgutils.get_or_insert_function(builder.module, fn_type, "llvm.fma.f32"), args)

    return signature, codegen


def _bits(typingctx, bits):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], _FLOAT)

    return types.float32(types.int32), codegen


#: ``fma(a, b, c)``: ``a * b + c`` rounded once (``llvm.fma``, which LLVM vectorizes), float32.
fma = typing.cast(Callable[[np.float32, np.float32, np.float32], np.float32], intrinsic(_fma))
#: The float32 whose bit pattern is the given int32.
_from_bits = typing.cast(Callable[[np.int32], np.float32], intrinsic(_bits))


@numba.njit(inline="always")
def _power_of_two(n: np.int32) -> np.float32:
    """``2**n`` for ``-126 <= n <= 127``, by its exponent bits."""
    return _from_bits((n + I32(127)) << I32(23))


#: ln 2 in two parts: ``_LN2_HIGH`` has 9 significant bits, so ``n * _LN2_HIGH`` is exact.
_LN2_HIGH, _LN2_LOW = F(0.693359375), F(-2.12194440e-4)
#: Adding and subtracting 1.5 * 2**23 rounds a float32 of magnitude below 2**22 to an integer.
_ROUND = F(12582912.0)


@numba.njit(inline="always")
def exp(x: np.float32) -> np.float32:
    """``e**x`` in float32 (Cephes' polynomial on ``[-ln2/2, ln2/2]``, evaluated with fma).

    ``x`` is first clamped to ``[-104, 88.8]``, where the scaling by ``2**n`` (in two steps, so
    that subnormal results are rounded once) still overflows to inf and underflows to 0; NaN
    skips the clamp (comparisons with it are false) and comes out NaN.
    """
    c = F(88.8) if x > F(88.8) else x
    c = F(-104.0) if c < F(-104.0) else c
    bounded = F(0.0) if c != c else c  # the integer conversion below must not see NaN
    n = (bounded * F(1.44269504088896341) + _ROUND) - _ROUND
    r = fma(n, -_LN2_LOW, fma(n, -_LN2_HIGH, bounded))
    p = fma(F(1.9875691500e-4), r, F(1.3981999507e-3))
    p = fma(p, r, F(8.3334519073e-3))
    p = fma(p, r, F(4.1665795894e-2))
    p = fma(p, r, F(1.6666665459e-1))
    p = fma(p, r, F(5.0000001201e-1))
    y = fma(p * r, r, r) + F(1.0)
    k = I32(n)
    half = k >> I32(1)
    y = y * _power_of_two(half) * _power_of_two(k - half)
    return x if x != x else y


@numba.njit(inline="always")
def sigmoid(x: np.float32) -> np.float32:
    """``1 / (1 + e**-x)``, as ``e**x / (1 + e**x)`` for negative ``x`` (no overflow, and the
    result keeps its digits down to subnormals)."""
    e = exp(-abs(x))
    return (e if x < F(0.0) else F(1.0)) / (F(1.0) + e)


@numba.njit(inline="always")
def tanh(x: np.float32) -> np.float32:
    """tanh: Cephes' odd polynomial below 0.625, ``1 - 2 / (e**2|x| + 1)`` from there (with the
    sign of ``x``), 1 from 10 on."""
    z = x * x
    p = fma(F(-5.70498872745e-3), z, F(2.06390887954e-2))
    p = fma(p, z, F(-5.37397155531e-2))
    p = fma(p, z, F(1.33314422036e-1))
    p = fma(p, z, F(-3.33332819422e-1))
    small = x * fma(p, z, F(1.0))  # not x + x * (p z), which turns -0 into +0
    a = abs(x)
    a = F(10.0) if a > F(10.0) else a  # NaN stays NaN
    large = F(1.0) - F(2.0) / (exp(a + a) + F(1.0))
    large = -large if x < F(0.0) else large
    return small if a < F(0.625) else large


#: Odd numerator (x^1 .. x^13) and even denominator (x^0 .. x^8) of erf on [-4, 4] (Eigen's).
_ERF_NUMERATOR = (
    F(-1.60960333262415e-02),
    F(-2.95459980854025e-03),
    F(-7.34990630326855e-04),
    F(-5.69250639462346e-05),
    F(-2.10102402082508e-06),
    F(2.77068142495902e-08),
    F(-2.72614225801306e-10),
)
_ERF_DENOMINATOR = (
    F(-1.42647390514189e-02),
    F(-7.37332916720468e-03),
    F(-1.68282697438203e-03),
    F(-2.13374055278905e-04),
    F(-1.45660718464996e-05),
)


@numba.njit(inline="always")
def erf(value: np.float32) -> np.float32:
    """erf as ``x * (P(x^2) / Q(x^2))`` on ``[-4, 4]``, ``x`` clamped there (beyond, erf is ±1 to
    float32 precision); the quotient first, so that tiny and subnormal ``x`` are rounded once."""
    x = F(4.0) if value > F(4.0) else value
    x = F(-4.0) if x < F(-4.0) else x  # NaN stays NaN
    s = x * x
    n = _ERF_NUMERATOR
    numerator = fma(fma(fma(fma(fma(fma(n[6], s, n[5]), s, n[4]), s, n[3]), s, n[2]), s, n[1]), s, n[0])
    d = _ERF_DENOMINATOR
    denominator = fma(fma(fma(fma(d[4], s, d[3]), s, d[2]), s, d[1]), s, d[0])
    return x * (numerator / denominator)


@numba.njit(inline="always")
def gelu(x: np.float32) -> np.float32:
    """``0.5 * x * (1 + erf(x / sqrt(2)))`` (Gelu's default, ``approximate="none"``)."""
    return F(0.5) * x * (F(1.0) + erf(x / F(1.4142135623730951)))


@numba.njit(inline="always")
def gelu_tanh(x: np.float32) -> np.float32:
    """``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))`` (``approximate="tanh"``)."""
    inner = F(0.7978845608028654) * (x + F(0.044715) * (x * x * x))
    return F(0.5) * x * (F(1.0) + tanh(inner))
