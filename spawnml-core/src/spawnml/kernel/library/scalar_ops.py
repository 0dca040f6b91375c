"""ONNX elementwise operators as kernel-IR expressions: the one definition every generated
elementwise kernel (one operator, or a fused chain) is built from, on every device.

A builder takes the operand expressions, typed as a GPU holds them (``f32``, or ``i32`` for
integer and bool tensors, bool as 0/1), the node's attributes, and the device type ``r`` of
the result, and returns the expression of one result element. NaN propagates wherever ONNX
says it does (Max, Min, Clip, the activations), whatever the target's ``max``/``min`` do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import ir
from ..ir import Expr, Scalar, bool_

Attrs = Mapping[str, Any]
Build = Callable[[Sequence[Expr], Attrs, Scalar], Expr]

#: The largest finite float32 and float64: ``abs(x) > largest`` is the portable test for an infinity.
FLT_MAX = 3.4028234663852886e38
DBL_MAX = 1.7976931348623157e308


@dataclass(frozen=True)
class ScalarOp:
    """How to compute one element of an operator; ``float_only`` operators take float32 alone."""

    build: Build
    float_only: bool = False


def const(value: float, like: Expr) -> ir.Const:
    """``value`` as a constant of ``like``'s type."""
    return ir.Const(float(value) if like.dtype.is_float else int(value), like.dtype)


def _bin(op: str, a: Expr, b: Expr) -> Expr:
    return ir.Binary(op, a, b, a.dtype)


def _cmp(op: str, a: Expr, b: Expr) -> Expr:
    return ir.Binary(op, a, b, bool_)


def largest(like: Expr, sign: int = 1) -> ir.Const:
    """``sign`` times the largest finite value of ``like``'s float type."""
    return const(sign * (DBL_MAX if like.dtype.bits == 64 else FLT_MAX), like)


def _call(fn: str, *args: Expr) -> Expr:
    return ir.Call(fn, args, args[0].dtype)


def _select(cond: Expr, a: Expr, b: Expr) -> Expr:
    return ir.Select(cond, a, b, a.dtype)


def flag(cond: Expr, r: Scalar) -> Expr:
    """A bool as the result type: 1 or 0."""
    return ir.Select(cond, ir.Const(1, r), ir.Const(0, r), r) if r != bool_ else cond


def is_nan(x: Expr) -> Expr:
    """Whether ``x`` is NaN, by the ``isnan`` intrinsic (``x != x`` may be folded away)."""
    return ir.Call("isnan", (x,), bool_) if x.dtype.is_float else ir.Const(False, bool_)


def _either_nan(a: Expr, b: Expr) -> Expr:
    return ir.Binary("||", is_nan(a), is_nan(b), bool_)


def _extreme(fn: str) -> Build:
    """Max or Min; for floats a NaN operand gives NaN (``a + b`` is then NaN)."""

    def build(args: Sequence[Expr], attrs: Attrs, r: Scalar) -> Expr:
        a, b = args
        value = _call(fn, a, b)
        return _select(_either_nan(a, b), _bin("+", a, b), value) if a.dtype.is_float else value

    return build


def clamp(x: Expr, low: Expr | None, high: Expr | None) -> Expr:
    """``x`` limited to ``[low, high]`` by comparisons, so that NaN passes through."""
    if low is not None:
        x = _select(_cmp("<", x, low), low, x)
    if high is not None:
        x = _select(_cmp(">", x, high), high, x)
    return x


def _exp(x: Expr) -> Expr:
    return _call("exp", x)


def _sigmoid(x: Expr) -> Expr:
    one = const(1, x)
    return _bin("/", one, _bin("+", one, _exp(ir.Unary("-", x, x.dtype))))


def _log1p(u: Expr) -> Expr:
    """``log(1 + u)`` for ``u >= 0``, by its series below 0.01 where ``1 + u`` loses digits (to
    ``u**5`` in float32, ``u**9`` in float64)."""
    series, power = u, u
    for k in range(2, 10 if u.dtype.bits == 64 else 6):
        power = _bin("*", power, u)
        series = _bin("+" if k % 2 else "-", series, _bin("/", power, const(k, u)))
    return _select(_cmp("<", u, const(0.01, u)), series, _call("log", _bin("+", const(1, u), u)))


def _softplus(x: Expr) -> Expr:
    """``log(1 + exp(x))`` without overflow: ``max(x, 0) + log1p(exp(-|x|))``."""
    zero = const(0, x)
    tail = _log1p(_exp(ir.Unary("-", _call("abs", x), x.dtype)))
    return _bin("+", _select(_cmp(">", x, zero), x, zero), tail)


def _mish(x: Expr) -> Expr:
    """``x * tanh(softplus(x))``, with ``tanh(log(1 + e)) = n / (n + 2)`` for ``n = e * (e + 2)``,
    ``e = exp(x)``: no cancellation where ``softplus(x)`` is tiny; ``x`` itself from 20 up."""
    e = _exp(x)
    n = _bin("*", e, _bin("+", e, const(2, x)))
    return _select(_cmp(">", x, const(20, x)), x, _bin("*", x, _bin("/", n, _bin("+", n, const(2, x)))))


def _tanh(x: Expr) -> Expr:
    """tanh, by its series where ``|x| < 0.05``: GPU tanh loses relative accuracy near 0 (float64's
    is accurate there, and the series too short for it)."""
    if x.dtype.bits == 64:
        return _call("tanh", x)
    x2 = _bin("*", x, x)
    poly = const(-17 / 315, x)
    for coefficient in (2 / 15, -1 / 3, 1.0):
        poly = _bin("+", _bin("*", poly, x2), const(coefficient, x))
    return _select(_cmp("<", _call("abs", x), const(0.05, x)), _bin("*", x, poly), _call("tanh", x))


def _pow(a: Expr, b: Expr) -> Expr:
    """``a ** b`` as C's pow: GPU pow is ``exp2(b * log2(a))``, undefined for ``a < 0`` and ``0 ** 0``,
    so a negative base with an integer exponent goes through ``|a|`` and the exponent's parity."""
    magnitude = _call("pow", _call("abs", a), b)
    whole = _cmp("==", _call("floor", b), b)
    half = _bin("*", b, const(0.5, b))
    odd = _cmp("!=", _call("floor", half), half)
    negative = _select(whole, _select(odd, ir.Unary("-", magnitude, a.dtype), magnitude), _call("pow", a, b))
    value = _select(_cmp("<", a, const(0, a)), negative, magnitude)
    return _select(_cmp("==", b, const(0, b)), const(1, a), value)


def _asin(x: Expr) -> Expr:
    """``atan(x / sqrt((1 - x)(1 + x)))``: GPU asin is often only accurate to 1e-4."""
    one = const(1, x)
    return _call("atan", _bin("/", x, _call("sqrt", _bin("*", _bin("-", one, x), _bin("+", one, x)))))


def _acos(x: Expr) -> Expr:
    """``2 atan(sqrt((1 - x) / (1 + x)))``, accurate near 1 where ``acos`` is small."""
    one = const(1, x)
    return _bin(
        "*", const(2, x), _call("atan", _call("sqrt", _bin("/", _bin("-", one, x), _bin("+", one, x))))
    )


def _trunc(x: Expr) -> Expr:
    return _select(
        _cmp("<", x, const(0, x)),
        ir.Unary("-", _call("floor", ir.Unary("-", x, x.dtype)), x.dtype),
        _call("floor", x),
    )


def _round_half_even(x: Expr) -> Expr:
    """Round to nearest, ties to even (values from 2**23 up are already integers)."""
    r = _call("floor", _bin("+", x, const(0.5, x)))
    tie = _cmp("==", _bin("-", r, x), const(0.5, x))
    odd = _cmp(
        "!=", _bin("-", r, _bin("*", const(2, x), _call("floor", _bin("*", r, const(0.5, x))))), const(0, x)
    )
    rounded = _select(ir.Binary("&&", tie, odd, bool_), _bin("-", r, const(1, x)), r)
    return _select(_cmp(">=", _call("abs", x), const(2.0**23, x)), x, rounded)


#: The float16 binades ``[2**e, 2**(e + 1))`` with their spacing ``2**(e - 10)``, largest first;
#: below ``2**-13`` (subnormals and the smallest binade) the spacing is ``2**-24``.
_HALF_BINADES = tuple((2.0**e, 2.0 ** (e - 10)) for e in range(15, -14, -1))
#: From here up a float32 rounds to float16 infinity.
_HALF_OVERFLOW = 65520.0


def _round_to_half(x: Expr) -> Expr:
    """``x`` rounded to the nearest float16 value (ties to even), held as float32: scaled by its
    binade's float16 spacing (a power of two, so exactly), rounded to an integer and scaled back;
    ``±inf`` from 65520 up (``x * FLT_MAX`` overflows with ``x``'s sign); a zero keeps ``x``'s sign
    (``x * 0``) and NaN stays NaN."""
    size = _call("abs", x)
    spacing: Expr = const(2.0**-24, x)
    for start, step in reversed(_HALF_BINADES):
        spacing = _select(_cmp(">=", size, const(start, x)), const(step, x), spacing)
    rounded = _bin("*", _round_half_even(_bin("/", x, spacing)), spacing)
    signed = _select(_cmp("==", rounded, const(0, x)), _bin("*", x, const(0, x)), rounded)
    return _select(_cmp(">=", size, const(_HALF_OVERFLOW, x)), _bin("*", x, const(FLT_MAX, x)), signed)


def _sign(x: Expr) -> Expr:
    zero = const(0, x)
    keep = x if x.dtype.is_float else zero  # NaN stays NaN, ±0 stays
    return _select(_cmp(">", x, zero), const(1, x), _select(_cmp("<", x, zero), const(-1, x), keep))


def _mod(args: Sequence[Expr], attrs: Attrs, r: Scalar) -> Expr:
    """``fmod=1``: the sign of the dividend (C's fmod); else the sign of the divisor (Python's %)."""
    a, b = args
    if a.dtype.is_float:  # an infinite divisor leaves a finite dividend as it is
        finite = _bin("-", a, _bin("*", b, _trunc(_bin("/", a, b))))
        rem = _select(_cmp(">", _call("abs", b), largest(b)), a, finite)
        if attrs.get("fmod", 0):
            return rem
    else:
        rem = _bin("%", a, b)
        if attrs.get("fmod", 0):
            return rem
    zero = const(0, a)
    fix = ir.Binary("&&", _cmp("!=", rem, zero), _cmp("!=", _cmp("<", rem, zero), _cmp("<", b, zero)), bool_)
    return _select(fix, _bin("+", rem, b), rem)


def _is_inf(args: Sequence[Expr], attrs: Attrs, r: Scalar) -> Expr:
    x = args[0]
    terms = []
    if attrs.get("detect_positive", 1):
        terms.append(_cmp(">", x, largest(x)))
    if attrs.get("detect_negative", 1):
        terms.append(_cmp("<", x, largest(x, -1)))
    if not terms:
        return ir.Const(0, r)
    cond = terms[0] if len(terms) == 1 else ir.Binary("||", *terms, bool_)
    return flag(cond, r)


def _gelu(args: Sequence[Expr], attrs: Attrs, r: Scalar) -> Expr:
    x = args[0]
    half, one = const(0.5, x), const(1, x)
    if attrs.get("approximate", "none") == "tanh":
        cube = _bin("*", _bin("*", x, x), x)
        inner = _bin("*", const(math.sqrt(2 / math.pi), x), _bin("+", x, _bin("*", const(0.044715, x), cube)))
        return _bin("*", _bin("*", half, x), _bin("+", one, _tanh(inner)))
    return _bin("*", _bin("*", half, x), _bin("+", one, _call("erf", _bin("*", x, const(math.sqrt(0.5), x)))))


def _attr(attrs: Attrs, name: str, default: float) -> float:
    return float(attrs.get(name, default))


def _unary(fn: Callable[[Expr], Expr], float_only: bool = True) -> ScalarOp:
    return ScalarOp(lambda args, attrs, r: fn(args[0]), float_only)


def _with_attrs(fn: Callable[[Expr, Attrs], Expr]) -> ScalarOp:
    return ScalarOp(lambda args, attrs, r: fn(args[0], attrs), float_only=True)


def _binary(op: str) -> ScalarOp:
    return ScalarOp(lambda args, attrs, r: _bin(op, *args))


def _compare(op: str) -> ScalarOp:
    return ScalarOp(lambda args, attrs, r: flag(_cmp(op, *args), r))


def _intrinsic(fn: str) -> ScalarOp:
    return _unary(lambda x: _call(fn, x))


def _cast(args: Sequence[Expr], attrs: Attrs, r: Scalar) -> Expr:
    return args[0] if args[0].dtype == r else ir.Cast(args[0], r)


def _leaky_relu(x: Expr, attrs: Attrs) -> Expr:
    return _select(_cmp("<", x, const(0, x)), _bin("*", const(_attr(attrs, "alpha", 0.01), x), x), x)


def _elu(x: Expr, attrs: Attrs) -> Expr:
    alpha = const(_attr(attrs, "alpha", 1.0), x)
    return _select(_cmp("<", x, const(0, x)), _bin("*", alpha, _bin("-", _exp(x), const(1, x))), x)


def _selu(x: Expr, attrs: Attrs) -> Expr:
    alpha = const(_attr(attrs, "alpha", 1.67326319217681884765625), x)
    gamma = const(_attr(attrs, "gamma", 1.05070102214813232421875), x)
    negative = _bin("-", _bin("*", alpha, _exp(x)), alpha)
    return _bin("*", gamma, _select(_cmp("<=", x, const(0, x)), negative, x))


def _celu(x: Expr, attrs: Attrs) -> Expr:
    alpha = const(_attr(attrs, "alpha", 1.0), x)
    negative = _bin("*", alpha, _bin("-", _exp(_bin("/", x, alpha)), const(1, x)))
    return _select(_cmp(">", x, const(0, x)), x, negative)


def _hard_sigmoid(x: Expr, attrs: Attrs) -> Expr:
    line = _bin("+", _bin("*", const(_attr(attrs, "alpha", 0.2), x), x), const(_attr(attrs, "beta", 0.5), x))
    return clamp(line, const(0, x), const(1, x))


def _hard_swish(x: Expr) -> Expr:
    return _bin("*", x, clamp(_bin("+", _bin("/", x, const(6, x)), const(0.5, x)), const(0, x), const(1, x)))


def _shrink(x: Expr, attrs: Attrs) -> Expr:
    bias, lambd = const(_attr(attrs, "bias", 0.0), x), const(_attr(attrs, "lambd", 0.5), x)
    above = _select(_cmp(">", x, lambd), _bin("-", x, bias), const(0, x))
    return _select(_cmp("<", x, ir.Unary("-", lambd, x.dtype)), _bin("+", x, bias), above)


def _thresholded_relu(x: Expr, attrs: Attrs) -> Expr:
    return _select(_cmp(">", x, const(_attr(attrs, "alpha", 1.0), x)), x, const(0, x))


def _relu(x: Expr) -> Expr:
    return _select(_cmp("<", x, const(0, x)), const(0, x), x)


def _bit_shift(args: Sequence[Expr], attrs: Attrs, r: Scalar) -> Expr:
    """A shift by less than 0 or at least 32 bits gives 0 (-1 for a negative value shifted right),
    as numpy does, where GPU shifts take the amount modulo 32."""
    x, y = args
    zero = const(0, x)
    out_of_range = ir.Binary("||", _cmp("<", y, zero), _cmp(">=", y, const(32, y)), bool_)
    if attrs.get("direction") == "LEFT":
        return _select(out_of_range, zero, _bin("<<", x, y))
    filled = zero if x.dtype.kind == "u" else _select(_cmp("<", x, zero), const(-1, x), zero)
    return _select(out_of_range, filled, _bin(">>", x, y))


def _fold(binary: Build, finish: Callable[[Expr, int], Expr] | None = None) -> Build:
    """A binary operator folded over any number of operands (Max, Min, Sum, Mean)."""

    def build(args: Sequence[Expr], attrs: Attrs, r: Scalar) -> Expr:
        out = args[0]
        for x in args[1:]:
            out = binary((out, x), attrs, r)
        return finish(out, len(args)) if finish else out

    return build


def _clip(args: Sequence[Expr], attrs: Attrs, r: Scalar) -> Expr:
    """Clip: bounds from the operands named by ``has_min``/``has_max``, else the attributes."""
    x, rest = args[0], list(args[1:])
    bounds = []
    for name in ("min", "max"):
        if attrs.get(f"has_{name}"):
            bounds.append(rest.pop(0))
        else:
            bounds.append(const(attrs[name], x) if name in attrs else None)
    return clamp(x, *bounds)


def _add(args: Sequence[Expr], attrs: Attrs, r: Scalar) -> Expr:
    return _bin("+", *args)


OPS: dict[str, ScalarOp] = {
    # Arithmetic, comparisons, logic.
    "Add": ScalarOp(_add),
    "Sub": _binary("-"),
    "Mul": _binary("*"),
    "Div": _binary("/"),
    "Pow": ScalarOp(lambda args, attrs, r: _pow(*args), float_only=True),
    "Max": ScalarOp(_fold(_extreme("max"))),
    "Min": ScalarOp(_fold(_extreme("min"))),
    "Sum": ScalarOp(_fold(_add)),
    "Mean": ScalarOp(_fold(_add, lambda s, n: _bin("/", s, const(n, s))), float_only=True),
    "Clip": ScalarOp(_clip),
    "Mod": ScalarOp(_mod),
    "BitShift": ScalarOp(_bit_shift),
    "And": _binary("&"),
    "Or": _binary("|"),
    "Xor": _binary("^"),
    "Not": ScalarOp(lambda args, attrs, r: _bin("^", args[0], const(1, args[0]))),
    "Equal": _compare("=="),
    "Greater": _compare(">"),
    "GreaterOrEqual": _compare(">="),
    "Less": _compare("<"),
    "LessOrEqual": _compare("<="),
    "Where": ScalarOp(
        lambda args, attrs, r: _select(_cmp("!=", args[0], const(0, args[0])), args[1], args[2])
    ),
    # Types.
    "Cast": ScalarOp(_cast),
    "CastBool": ScalarOp(lambda args, attrs, r: flag(_cmp("!=", args[0], const(0, args[0])), r)),
    "CastFloat16": ScalarOp(lambda args, attrs, r: _round_to_half(_cast(args, attrs, r))),
    "IsNaN": ScalarOp(lambda args, attrs, r: flag(is_nan(args[0]), r), float_only=True),
    "IsInf": ScalarOp(_is_inf, float_only=True),
    # Unary math.
    "Abs": _unary(lambda x: _call("abs", x), float_only=False),
    "Neg": _unary(lambda x: ir.Unary("-", x, x.dtype), float_only=False),
    "Sign": _unary(_sign, float_only=False),
    "Reciprocal": _unary(lambda x: _bin("/", const(1, x), x)),
    "Sqrt": _intrinsic("sqrt"),
    "Exp": _intrinsic("exp"),
    "Log": _intrinsic("log"),
    "Erf": _intrinsic("erf"),
    "Floor": _intrinsic("floor"),
    "Ceil": _intrinsic("ceil"),
    "Round": _unary(_round_half_even),
    "Sin": _intrinsic("sin"),
    "Cos": _intrinsic("cos"),
    "Tan": _intrinsic("tan"),
    "Asin": _unary(_asin),
    "Acos": _unary(_acos),
    "Atan": _intrinsic("atan"),
    "Sinh": _intrinsic("sinh"),
    "Cosh": _intrinsic("cosh"),
    "Tanh": _unary(_tanh),
    "Asinh": _intrinsic("asinh"),
    "Acosh": _intrinsic("acosh"),
    "Atanh": _intrinsic("atanh"),
    # Activations.
    "Relu": _unary(_relu, float_only=False),
    "Sigmoid": _unary(_sigmoid),
    "HardSigmoid": _with_attrs(_hard_sigmoid),
    "HardSwish": _unary(_hard_swish),
    "LeakyRelu": _with_attrs(_leaky_relu),
    "PRelu": ScalarOp(
        lambda args, attrs, r: _select(
            _cmp("<", args[0], const(0, args[0])), _bin("*", args[1], args[0]), args[0]
        ),
        float_only=True,
    ),
    "Elu": _with_attrs(_elu),
    "Selu": _with_attrs(_selu),
    "Celu": _with_attrs(_celu),
    "ThresholdedRelu": _with_attrs(_thresholded_relu),
    "Softplus": _unary(_softplus),
    "Softsign": _unary(lambda x: _bin("/", x, _bin("+", const(1, x), _call("abs", x)))),
    "Mish": _unary(_mish),
    "Gelu": ScalarOp(_gelu, float_only=True),
    "Shrink": _with_attrs(_shrink),
}
