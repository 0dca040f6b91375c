"""Rounding to the 8- and 4-bit floats and wrapping into the 2- to 16-bit integers, for tensors a
GPU holds as float32 and int32, by the rules of ONNX's specification (not of a library).

:func:`round_to_float` rounds each value to the nearest value of a :class:`FloatFormat`, ties to
even, as the Cast operator's float 8 tables and the float4 type's cast table say: it finds the
value's binade among the format's by comparing with powers of two, scales by the binade's spacing
(a power of two, so exactly), rounds to an integer and scales back. A value that rounds past the
format's largest becomes the launch's ``overflow`` scalar with the value's sign: the largest itself
when saturating, else infinity or NaN as the format has them (a scalar, because shader compilers
may fold a NaN or infinity written in the source).

:func:`wrap_to_int` keeps the low bits, two's complement, of integers ("discard higher bits and
reinterpret") and of floats: rounded to the nearest integer, ties to even, for the 4- and 2-bit
types (whose type documents say "rounding to the nearest-integer (with ties to even) nearest-even
integer and truncating"), truncated toward zero for the 8- and 16-bit ones (where the
specification states no rounding, as C and numpy convert). The specification leaves NaN, the
infinities and other floats out of range undefined ("fixed point: undefined if OOR"); here NaN, the
infinities and floats outside int32 give 0 (for the 4- and 2-bit types the low bits of those
finite floats are 0 anyway).

Both are built as kernel IR rather than parsed from Python: they test for NaN with the ``isnan``
intrinsic, which renderers spell by the bits where ``x != x`` may be folded away. Launch ``n``
threads over a 2-D grid of ``width`` threads per grid row, like the elementwise maps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from .. import ir
from ..ir import Expr, Scalar, Stmt, bool_, f32, i32, u32

#: Floats from here up (in magnitude) are outside int32.
INT32_BOUND = 2.0**31


@dataclass(frozen=True)
class FloatFormat:
    """A float format narrower than float16, by what rounding to it needs.

    ``mantissa``: stored significand bits; ``min_exponent``: the exponent of the smallest normal
    value (the subnormals share its binade's spacing); ``largest``: the largest finite value;
    ``overflow``: what a value past it becomes without saturation (``"inf"``, ``"nan"``, or
    ``"largest"`` for a format with neither); ``signed_zero``: False where -0 is not a value (the
    ``fnuz`` formats, where negative values that round to zero give +0); ``nan``: what NaN becomes
    in a format without NaN (None where NaN stays NaN). A format without infinities or NaN
    (``overflow="largest"``) saturates whatever the ``saturate`` attribute says.
    """

    name: str
    mantissa: int
    min_exponent: int
    largest: float
    overflow: str
    signed_zero: bool = True
    nan: float | None = None

    @property
    def binades(self) -> int:
        """How many binades lie above the smallest normal one, up to the largest value's."""
        return math.frexp(self.largest)[1] - 1 - self.min_exponent

    def overflow_value(self, saturate: bool) -> float:
        """What a value past :attr:`largest` becomes (with its sign), saturating or not."""
        return self.largest if saturate or self.overflow == "largest" else float(self.overflow)


#: The narrow float formats, by numpy dtype name (ml_dtypes' types).
FORMATS = {
    f.name: f
    for f in (
        FloatFormat("float8_e4m3fn", 3, -6, 448.0, "nan"),
        FloatFormat("float8_e4m3fnuz", 3, -7, 240.0, "nan", signed_zero=False),
        FloatFormat("float8_e5m2", 2, -14, 57344.0, "inf"),
        FloatFormat("float8_e5m2fnuz", 2, -15, 57344.0, "nan", signed_zero=False),
        # ONNX's float4 cast table: "+Inf | 6", "-Inf | -6", "NaN | 6" (ml_dtypes gives -0 for NaN).
        FloatFormat("float4_e2m1fn", 1, 0, 6.0, "largest", nan=6.0),
    )
}


def _f32(value: float) -> ir.Const:
    return ir.Const(float(value), f32)


def _var(name: str, dtype: Scalar = f32) -> ir.Var:
    return ir.Var(name, dtype)


def _op(a: Expr, symbol: str, b: Expr) -> ir.Binary:
    """``a symbol b``: bool for comparisons and logic, else of ``a``'s type."""
    logical = symbol in ("<", "<=", ">", ">=", "==", "!=", "&&", "||")
    return ir.Binary(symbol, a, b, bool_ if logical else a.dtype)


def _call(fn: str, x: Expr) -> ir.Call:
    return ir.Call(fn, (x,), bool_ if fn == "isnan" else x.dtype)


def _with_sign_of(v: Expr, magnitude: Expr) -> ir.Select:
    return ir.Select(_op(v, "<", ir.Const(0, v.dtype)), ir.Unary("-", magnitude, v.dtype), magnitude, v.dtype)


def _round_half_even(size: Expr) -> tuple[Stmt, ...]:
    """Declares ``whole``: ``size`` (not negative, below 2**31) rounded to an integer, ties to
    even; every step is exact in float32."""
    whole, rest = _var("whole"), _var("rest")
    odd = _op(_op(whole, "-", _op(_f32(2), "*", _call("floor", _op(whole, "*", _f32(0.5))))), "!=", _f32(0))
    up = _op(_op(rest, ">", _f32(0.5)), "||", _op(_op(rest, "==", _f32(0.5)), "&&", odd))
    return (
        ir.Declare("whole", _call("floor", size)),
        ir.Declare("rest", _op(size, "-", whole)),
        ir.If(up, (ir.Assign("whole", _op(whole, "+", _f32(1))),), ()),
    )


def _store(value: Expr) -> ir.Store:
    return ir.Store("out", _var("i", u32), value)


def _elementwise(
    name: str, source: Scalar, result: Scalar, scalars: tuple[str, ...], body: list[Stmt]
) -> ir.Kernel:
    """A kernel over ``n`` elements whose ``body`` reads ``v`` (``x[i]``) and stores ``out[i]``;
    ``scalars`` are float32 parameters."""
    i = _var("i", u32)
    gid = _op(_op(ir.Id("global", 1), "*", _var("width", u32)), "+", ir.Id("global", 0))
    params = (
        ir.Param("x", ir.BufferType(source, writable=False)),
        ir.Param("out", ir.BufferType(result, writable=True)),
        *(ir.Param(s, f32) for s in scalars),
        ir.Param("n", u32),
        ir.Param("width", u32),
    )
    read = ir.Declare("v", ir.Load("x", i, source))
    return ir.Kernel(
        name=name,
        params=params,
        shared=(),
        body=(ir.Declare("i", gid), ir.If(_op(i, "<", _var("n", u32)), (read, *body), ())),
        workgroup=(64, 1, 1),
        source=f"{__name__}.{name}",
        dtypes=frozenset({source, result, f32, i32, u32, bool_}),
    )


@cache
def round_to_float(fmt: FloatFormat, source: Scalar) -> ir.Kernel:
    """``out[i]`` = ``x[i]`` (float32, or int32 converted) rounded to ``fmt``, held as float32; the
    float32 scalar ``overflow`` is what values past ``fmt.largest`` become (with their sign), see
    :meth:`FloatFormat.overflow_value`."""
    value = _var("value")
    size, spacing, inverse, bound = _var("size"), _var("spacing"), _var("inverse"), _var("bound")
    whole = _var("whole")
    magnitude = _op(whole, "*", spacing)
    # Values that round to zero keep their sign (``1 / value`` is negative for -0 too, where
    # ``value * 0`` may be folded to +0), except where -0 is not a value.
    negative = _op(_op(_f32(1), "/", value), "<", _f32(0))
    zero = ir.Select(negative, _f32(-0.0), _f32(0), f32) if fmt.signed_zero else _f32(0)
    next_binade = (
        ir.Assign("spacing", _op(spacing, "*", _f32(2))),
        ir.Assign("inverse", _op(inverse, "*", _f32(0.5))),
        ir.Assign("bound", _op(bound, "*", _f32(2))),
    )
    rounding = (
        ir.Declare("size", _call("abs", value)),
        ir.Declare("spacing", _f32(2.0 ** (fmt.min_exponent - fmt.mantissa))),
        ir.Declare("inverse", _f32(2.0 ** (fmt.mantissa - fmt.min_exponent))),
        ir.Declare("bound", _f32(2.0 ** (fmt.min_exponent + 1))),
        ir.For(
            "b",
            ir.Const(0, i32),
            ir.Const(fmt.binades, i32),
            1,
            (ir.If(_op(size, ">=", bound), next_binade, ()),),
        ),
        # Below 2**(mantissa + 1) unless past the range (where any value above the largest will do).
        ir.Declare("scaled", _op(size, "*", inverse)),
        *_round_half_even(_var("scaled")),
        ir.If(
            _op(magnitude, ">", _f32(fmt.largest)),
            (_store(_with_sign_of(value, _var("overflow"))),),
            (_store(ir.Select(_op(whole, "==", _f32(0)), zero, _with_sign_of(value, magnitude), f32)),),
        ),
    )
    nan = value if fmt.nan is None else _f32(fmt.nan)
    body: list[Stmt] = [
        ir.Declare("value", _var("v", source) if source == f32 else ir.Cast(_var("v", source), f32)),
        ir.If(_call("isnan", value), (_store(nan),), rounding),
    ]
    return _elementwise(f"round_to_{fmt.name}", source, f32, ("overflow",), body)


@cache
def wrap_to_int(bits: int, signed: bool, source: Scalar, round_even: bool = False) -> ir.Kernel:
    """``out[i]`` = the low ``bits`` bits of ``x[i]`` (int32, or float32 rounded to an integer: to
    nearest, ties to even, when ``round_even``, else toward zero), as a ``bits``-bit integer
    (``signed``: two's complement), held as int32; NaN, the infinities and floats outside int32
    give 0."""
    count, half = 2**bits, 2 ** (bits - 1)
    kind = f"{'' if signed else 'u'}int{bits}"
    if source == i32:
        low = _op(_var("v", i32), "&", ir.Const(count - 1, i32))
        wrapped = _op(_op(low, "^", ir.Const(half, i32)), "-", ir.Const(half, i32)) if signed else low
        return _elementwise(f"wrap_to_{kind}", source, i32, (), [_store(wrapped)])
    v, whole, low = _var("v"), _var("whole"), _var("low")
    # The rounded value modulo 2**bits, in [0, 2**bits): exact, as every step is.
    modulo = _op(whole, "-", _op(_f32(count), "*", _call("floor", _op(whole, "*", _f32(1 / count)))))
    wrapped = ir.Select(_op(low, ">=", _f32(half)), _op(low, "-", _f32(count)), low, f32) if signed else low
    special = _op(_call("isnan", v), "||", _op(_call("abs", v), ">=", _f32(INT32_BOUND)))
    size = _call("abs", v)
    rounding = _round_half_even(size) if round_even else (ir.Declare("whole", _call("floor", size)),)
    finite = (
        *rounding,
        ir.Assign("whole", _with_sign_of(v, whole)),
        ir.Declare("low", modulo),
        _store(ir.Cast(wrapped, i32)),
    )
    body: list[Stmt] = [ir.If(special, (_store(ir.Const(0, i32)),), finite)]
    name = f"{'round' if round_even else 'wrap'}_float_to_{kind}"
    return _elementwise(name, source, i32, (), body)
