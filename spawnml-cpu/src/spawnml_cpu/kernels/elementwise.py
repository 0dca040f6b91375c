"""CPU kernels of the elementwise ai.onnx operators.

Most kernels are one numpy expression ``fn(attrs, *inputs)`` in a table. Inputs narrower
than float32 (float16, bfloat16) are computed in float32 and rounded once at the end, and
every result is given exactly the element type ONNX specifies.
"""

from __future__ import annotations

import functools
import math
import operator
import typing
from collections.abc import Callable, Sequence
from typing import Any, overload

import numpy as np
from spawnml import dtypes
from spawnml.backend import KernelContext
from spawnml.errors import InvalidArgumentError
from spawnml.ir import Node
from spawnml.plan_compiler import Direct, Specializer, specialize

from .checks import one_of
from .narrow import to_narrow
from .nn_common import is_widened
from .table import KERNELS
from .threads import part_count, run_spans, thread_count

Array = np.ndarray
Attrs = dict[str, Any]
#: ``fn(attrs, *inputs)`` computing an operator on (widened) numpy arrays: an array, or the numpy
#: scalar a ufunc gives for 0-d inputs (:func:`finish` makes it an array).
Compute = Callable[..., Array | np.generic]

BOOL = np.dtype(np.bool_)
FLOAT32 = np.dtype(np.float32)
_NARROW_FLOATS = dtypes.HALF_FLOAT_NAMES


@overload
def widen(x: Array) -> Array: ...
@overload
def widen(x: None) -> None: ...
@overload
def widen(x: Array | None) -> Array | None: ...
def widen(x: Array | None) -> Array | None:
    """``x`` in the type to compute it in: float32 for narrower floats, else unchanged."""
    return x.astype(FLOAT32) if x is not None and is_widened(x.dtype) else x


def finish(result: Any, dtype: np.dtype, inputs: tuple[Array | None, ...]) -> Array:
    """``result`` as an array of ``dtype`` that is none of the kernel's inputs."""
    out = result if type(result) is np.ndarray else np.asarray(result)
    if out.dtype != dtype:
        out = out.astype(dtype)
    for given in inputs:
        if out is given:
            return out.copy()
    return out


#: A direct call of an operator for the element type of its first input (see :func:`_register`).
DirectFor = Callable[[np.dtype], Direct]


def _register(
    name: str,
    fn: Compute,
    out: int | np.dtype = 0,
    check: Callable[[Node, int], str | None] | None = None,
    since: int = 1,
    until: int | None = None,
    direct: DirectFor | None = None,
) -> None:
    """Register ``fn`` as a kernel; ``out`` is the result's dtype, or the input whose dtype it takes.

    Runs under the plan's ``np.errstate``: IEEE results (inf, NaN) come out without warnings.
    ``direct`` gives, for an input type, the call of the inputs alone that computes what ``fn``
    does where nothing is widened: compiled plans call it instead (:func:`_exact_direct`).
    """

    def kernel(ctx: KernelContext, *inputs: Array | None) -> Array:
        dtype = typing.cast(Array, inputs[out]).dtype if isinstance(out, int) else out  # that input is given
        return finish(fn(ctx.attrs, *map(widen, inputs)), dtype, inputs)

    KERNELS.register(name, since=since, until=until, check=check)(kernel)
    if direct is not None:
        specialize(kernel, _exact_direct(direct, out))


def _register_all(
    table: dict[str, Compute],
    out: int | np.dtype = 0,
    checks: dict[str, Callable[[Node, int], str | None]] | None = None,
    since: int = 1,
    until: int | None = None,
    direct: dict[str, DirectFor] | None = None,
) -> None:
    for name, fn in table.items():
        check, call = (checks or {}).get(name), (direct or {}).get(name)
        _register(name, fn, out, check=check, since=since, until=until, direct=call)


def _numpy_number(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is one of numpy's own numbers or booleans (not strings, objects, nor the
    types ml_dtypes adds, some of which numpy counts as floats)."""
    return dtype.isbuiltin == 1 and dtype.kind in "biufc"


def _exact_direct(direct: DirectFor, out: int | np.dtype) -> Specializer:
    """A specializer giving ``direct``'s call where it computes bit for bit what the kernel does.

    That is where shape inference knows every input's type and rank, none is narrower than float32
    (the kernel widens those), one has a dimension (numpy gives scalars for 0-d operands, which
    :func:`finish` makes arrays), and the call gives an array of the kernel's result type
    (:func:`finish` casts otherwise; a one-element probe tells, as types never follow values).
    """

    def specializer(ctx: KernelContext, inputs: Sequence[Any], outputs: Sequence[Any]) -> Direct | None:
        if any(known is None or known.dtype is None or known.shape is None for known in inputs):
            return None
        types = [known.dtype for known in inputs]
        if any(dtype.name in _NARROW_FLOATS or not _numpy_number(dtype) for dtype in types):
            return None
        if not any(len(known.shape) for known in inputs):
            return None
        call = direct(types[0])
        return call if _gives(call, tuple(types), types[out] if isinstance(out, int) else out) else None

    return specializer


@functools.cache
def _gives(call: Direct, types: tuple[np.dtype, ...], expected: np.dtype) -> bool:
    """Whether ``call`` on arrays of ``types`` gives an array of ``expected``, by a one-element probe."""
    with np.errstate(all="ignore"):
        probe = call.fn(*(np.ones(1, dtype) for dtype in types), *call.extra)
    return type(probe) is np.ndarray and probe.dtype == expected


def _plain(fn: Callable[..., Array]) -> DirectFor:
    """The direct call of ``fn`` itself, whatever the type."""
    call = Direct(fn)
    return lambda dtype: call


# Passes over the threads ---------------------------------------------------------------

#: The least elements of a pass worth cutting over threads (see :func:`over_threads`): below it,
#: handing parts to the pool's threads costs about what they save (``docs/performance.md``).
MIN_SPLIT_ELEMENTS = 1 << 20
#: The least elements of one part.
MIN_PART_ELEMENTS = 1 << 18


def over_threads(run: Callable[[slice], None], size: int, threads: int | None = None) -> None:
    """``run`` over spans of ``range(size)``: whole on the calling thread below
    :data:`MIN_SPLIT_ELEMENTS`, else cut into parts over ``threads`` threads (:func:`thread_count`
    by default). Each part runs under ``np.errstate(all="ignore")``, as the plan's kernels do."""
    if size < MIN_SPLIT_ELEMENTS:  # without asking the thread count: that takes a lock
        run(slice(0, size))
        return
    threads = thread_count() if threads is None else threads
    parts = part_count(size, max(1, size // MIN_PART_ELEMENTS), threads, least=MIN_SPLIT_ELEMENTS)

    def part(span: slice) -> None:
        with np.errstate(all="ignore"):
            run(span)

    run_spans(part if parts > 1 else run, size, parts, threads)


# Unary math and activations -----------------------------------------------------------


@functools.cache
def _float32_loop(name: str) -> Callable[[Array, Array], None]:
    """``loop(out, x)``: ``out[i] = f(x[i])`` over flat float32 arrays for the function ``name``
    of :mod:`.vector_math`, compiled with numba on first use (it vectorizes and runs without the
    GIL)."""
    import numba

    from . import vector_math

    fn = getattr(vector_math, name)

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def loop(out: Array, x: Array) -> None:
        for i in range(out.size):
            out[i] = fn(x[i])

    return typing.cast(Callable[[Array, Array], None], loop)


def map_float32(name: str, x: Array) -> Array:
    """The function ``name`` of :mod:`.vector_math` over the float32 array ``x``, as a new array,
    cut over the threads where it is large."""
    out = np.empty(x.shape, FLOAT32)
    source, target = np.ascontiguousarray(x).reshape(-1), out.reshape(-1)
    loop = _float32_loop(name)
    if x.size < MIN_SPLIT_ELEMENTS:  # as over_threads would, without making spans
        loop(target, source)
    else:
        over_threads(lambda span: loop(target[span], source[span]), x.size)
    return out


def _split(fn: np.ufunc) -> Callable[[Array], Array]:
    """The unary numpy ufunc ``fn`` over spans of the flat array on the threads where it is large
    (numpy releases the GIL in the loop)."""

    def run(x: Array) -> Array:
        if x.size < MIN_SPLIT_ELEMENTS:
            return typing.cast(Array, fn(x))
        source = np.ascontiguousarray(x)
        out = np.empty(x.shape, fn(source.reshape(-1)[:1]).dtype)
        flat, target = source.reshape(-1), out.reshape(-1)

        def part(span: slice) -> None:
            fn(flat[span], out=target[span])

        over_threads(part, x.size)
        return out

    return run


def _vector(name: str, fn: Callable[[Array], Array]) -> Callable[[Array], Array]:
    """:mod:`.vector_math`'s ``name`` for float32, ``fn`` for the other types."""
    return lambda x: map_float32(name, x) if x.dtype == FLOAT32 else fn(x)


@functools.cache
def erf_ufunc() -> Callable[[Array], Array]:
    """The error function (numpy has none): float32 by :func:`.vector_math.erf` (within 5e-7
    absolute), float64 by ``math.erf`` compiled with numba on first use, one libm call per element."""
    import numba

    exact = numba.vectorize(["float64(float64)"], cache=True)(_erf_scalar)
    return _vector("erf", exact)


def _erf_scalar(value: float) -> float:
    return math.erf(value)


def _softplus(x: Array) -> Array:
    return np.logaddexp(0, x)


def erf_gelu(x: Array) -> Array:
    """``0.5 * x * (1 + erf(x / sqrt(2)))``: float32 in one compiled pass, other types in place on
    one temporary (halving is exact, so ``(1 + erf) * 0.5 * x`` rounds as the definition's order
    does)."""
    if x.dtype == FLOAT32:
        return map_float32("gelu", x)
    y = erf_ufunc()(x / math.sqrt(2))
    y += 1
    y *= 0.5
    y *= x
    return y


def _gelu(attrs: Attrs, x: Array) -> Array:
    if attrs["approximate"] != "tanh":
        return erf_gelu(x)
    if x.dtype == FLOAT32:
        return map_float32("gelu_tanh", x)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


_UFUNCS: dict[str, Callable[[Array], Array]] = {
    "Abs": np.abs,
    "Neg": np.negative,
    "Exp": _split(np.exp),
    "Log": np.log,
    "Sqrt": np.sqrt,
    "Reciprocal": np.reciprocal,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.round,
    "Sign": np.sign,
    "Sin": np.sin,
    "Cos": np.cos,
    "Tan": np.tan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Atan": np.arctan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Asinh": np.arcsinh,
    "Acosh": np.arccosh,
    "Atanh": np.arctanh,
    "Tanh": _split(np.tanh),
    "Erf": lambda x: erf_ufunc()(x),
    "Sigmoid": _vector("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
    "Relu": lambda x: np.maximum(x, 0),
    "Softplus": _softplus,
    "Softsign": lambda x: x / (1 + np.abs(x)),
    "HardSwish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
    "Mish": lambda x: x * np.tanh(_softplus(x)),
    "Not": np.logical_not,
    "BitwiseNot": np.invert,
}
_ACTIVATIONS: dict[str, Compute] = {
    "LeakyRelu": lambda a, x: np.where(x < 0, a["alpha"] * x, x),
    "Elu": lambda a, x: np.where(x < 0, a["alpha"] * np.expm1(x), x),
    "Selu": lambda a, x: a["gamma"] * np.where(x > 0, x, a["alpha"] * np.expm1(x)),
    "Celu": lambda a, x: np.maximum(x, 0) + np.minimum(0, a["alpha"] * np.expm1(x / a["alpha"])),
    "ThresholdedRelu": lambda a, x: np.where(x > a["alpha"], x, 0),
    "HardSigmoid": lambda a, x: np.clip(a["alpha"] * x + a["beta"], 0, 1),
    "Gelu": _gelu,
}
_PREDICATES: dict[str, Compute] = {
    "IsNaN": lambda a, x: np.isnan(x),
    "IsInf": lambda a, x: (
        (np.isposinf(x) & bool(a["detect_positive"])) | (np.isneginf(x) & bool(a["detect_negative"]))
    ),
}

_register_all(
    {name: lambda attrs, x, f=ufunc: f(x) for name, ufunc in _UFUNCS.items()},
    direct={
        **{name: _plain(ufunc) for name, ufunc in _UFUNCS.items()},
        # numpy's maximum with a scalar of the array's own type: a Python 0 costs a conversion
        "Relu": lambda dtype: Direct(np.maximum, (dtype.type(0),)),
    },
)
_register_all(_ACTIVATIONS, checks={"Gelu": one_of("approximate", "none", ("none", "tanh"))})
_register_all(_PREDICATES, out=BOOL)


@KERNELS.register("PRelu")
def prelu(ctx: KernelContext, x: Array, slope: Array) -> Array:
    """Before opset 7 a 1-D slope as long as the channel axis is per channel, not broadcast."""
    if ctx.opset < 7 and slope.ndim == 1 and x.ndim > 2 and slope.size == x.shape[1] != 1:
        slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))
    with np.errstate(all="ignore"):
        return finish(np.where(x < 0, widen(slope) * widen(x), widen(x)), x.dtype, (x, slope))


def _clamp(x: Array, low: Any, high: Any) -> Array:
    """``x`` limited to ``[low, high]``; a bound of None does not limit."""
    with np.errstate(all="ignore"):
        result = widen(x)
        if low is not None:
            result = np.maximum(result, widen(np.asarray(low)))
        if high is not None:
            result = np.minimum(result, widen(np.asarray(high)))
        return finish(result, x.dtype, (x,))


def _finite_range(dtype: np.dtype) -> tuple[Any, Any]:
    info = dtypes.iinfo(dtype) if dtype.kind in "iu" else dtypes.finfo(dtype)
    return info.min, info.max


@KERNELS.register("Clip", until=11)
def clip_attributes(ctx: KernelContext, x: Array) -> Array:
    """Clip by the ``min``/``max`` attributes (none before opset 6, ±FLT_MAX from 6)."""
    return _clamp(x, ctx.attrs.get("min"), ctx.attrs.get("max"))


@KERNELS.register("Clip", since=11)
def clip(ctx: KernelContext, x: Array, low: Array | None = None, high: Array | None = None) -> Array:
    """Clip by the ``min``/``max`` inputs; an omitted one is the type's finite limit."""
    lowest, highest = _finite_range(x.dtype)
    return _clamp(x, lowest if low is None else low, highest if high is None else high)


# Binary and variadic ------------------------------------------------------------------


def _truncating_divide(a: Array, b: Array) -> Array:
    """Integer division rounding toward zero, as in C."""
    quotient = np.floor_divide(a, b)
    if a.dtype.kind == "i" or b.dtype.kind == "i":
        quotient += (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return quotient


def divide(a: Array, b: Array) -> Array:
    """``a / b``, truncating toward zero when both are integers."""
    integral = a.dtype.kind in "iu" and b.dtype.kind in "iu"
    return _truncating_divide(a, b) if integral else np.true_divide(a, b)


def _power(base: Array, exponent: Array) -> Array:
    """``base ** exponent``; integer powers with negative exponents truncate like C's pow."""
    if base.dtype.kind not in "iu" or exponent.dtype.kind not in "iu":
        return np.power(base, exponent)
    base, exponent = np.broadcast_arrays(base, exponent)
    result = np.power(base, np.maximum(exponent, 0))
    unit = np.where((base == -1) & (exponent % 2 == 1), -1, 1)
    return np.where(exponent >= 0, result, np.where(np.abs(base) == 1, unit, 0))


def _shift(attrs: Attrs, x: Array, y: Array) -> Array:
    return (np.left_shift if attrs["direction"] == "LEFT" else np.right_shift)(x, y)


def _legacy_operand(attrs: Attrs, a: Array, b: Array) -> Array:
    """Before opset 7, ``broadcast=1`` lays B's dims onto A's from ``axis`` (default: trailing)."""
    if not attrs.get("broadcast"):
        return b
    axis = attrs.get("axis", a.ndim - b.ndim) % max(a.ndim, 1)
    return b.reshape(b.shape + (1,) * (a.ndim - axis - b.ndim))


def _legacy_binary(fn: Callable[[Array, Array], Array]) -> Compute:
    return lambda attrs, a, b: fn(a, _legacy_operand(attrs, a, b))


def _binary(fn: Callable[[Array, Array], Array]) -> Compute:
    return lambda attrs, a, b: fn(a, b)


def _variadic(fn: Callable[[Array, Array], Array]) -> Compute:
    return lambda attrs, *inputs: functools.reduce(fn, inputs)


_BINARY: dict[str, Callable[[Array, Array], Array]] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": divide,
    "Pow": _power,
}
_COMPARISONS: dict[str, Callable[[Array, Array], Array]] = {
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal,
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.logical_xor,
}
_BITWISE: dict[str, Callable[[Array, Array], Array]] = {
    "BitwiseAnd": np.bitwise_and,
    "BitwiseOr": np.bitwise_or,
    "BitwiseXor": np.bitwise_xor,
}

#: The opset from which binary operators broadcast as numpy does, with no broadcast attribute.
_NUMPY_BROADCAST = 7
for _table, _out in ((_BINARY, 0), (_COMPARISONS, BOOL)):
    _register_all({name: _legacy_binary(fn) for name, fn in _table.items()}, _out, until=_NUMPY_BROADCAST)
    _register_all(
        {name: _binary(fn) for name, fn in _table.items()},
        _out,
        since=_NUMPY_BROADCAST,
        direct={name: _plain(fn) for name, fn in _table.items()},
    )
_register_all(
    {name: _binary(fn) for name, fn in _BITWISE.items()},
    direct={name: _plain(fn) for name, fn in _BITWISE.items()},
)
_register_all(
    {
        "Max": _variadic(np.maximum),
        "Min": _variadic(np.minimum),
        "Sum": _variadic(np.add),
        "Mean": lambda attrs, *inputs: functools.reduce(np.add, inputs) / len(inputs),
        "Mod": lambda attrs, a, b: (np.fmod if attrs["fmod"] else np.mod)(a, b),
        "BitShift": _shift,
    },
    checks={"BitShift": one_of("direction", "", ("LEFT", "RIGHT"))},
)


def _where(attrs: Attrs, condition: Array, x: Array, y: Array) -> Array:
    """``numpy.where``, but ``y`` (``x``) where the condition holds nowhere (everywhere): guards such
    as a NaN check after a softmax seldom fire. The result is a view of it where it has the
    result's shape and is writeable (as Reshape gives a view of its input), else a copy."""
    if not condition.any():
        chosen = y
    elif condition.all():
        chosen = x
    else:
        return np.where(condition, x, y)
    shape = np.broadcast_shapes(condition.shape, x.shape, y.shape)
    if chosen.shape == shape and chosen.flags.writeable:
        return chosen.view()
    return np.array(np.broadcast_to(chosen, shape))


_register("Where", _where, out=1)


# Casts --------------------------------------------------------------------------------

#: The ONNX codes of every element type but float8e8m0 (24): ONNX rounds to it by the round_mode attribute
#: (up by default), ml_dtypes to nearest.
_CASTABLE = frozenset((1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20, 21, 22, 23, 25, 26))


def _check_cast(node: Node, opset: int) -> str | None:
    try:
        code = int(node.attrs["to"])
        target = dtypes.from_onnx(code)
    except (InvalidArgumentError, KeyError, TypeError, ValueError):
        return f"to={node.attrs.get('to')!r} is not an element type code"
    return None if code in _CASTABLE else f"casting to {dtypes.name(target)} is not implemented"


def _format_float(value: float) -> str:
    """A float as onnxruntime writes it: 8 significant digits, NaN and [-]INF."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "INF" if value > 0 else "-INF"
    return f"{value:.8g}"


def _to_strings(x: Array) -> Array:
    if x.dtype.kind in "biu":
        items = [str(int(item)) for item in x.reshape(-1).tolist()]
    else:
        items = [_format_float(item) for item in x.astype(np.float64).reshape(-1).tolist()]
    return np.array(items, dtype=dtypes.STRING).reshape(x.shape)


def _cast(x: Array, target: np.dtype, attrs: Attrs) -> Array:
    if target == dtypes.STRING and x.dtype != dtypes.STRING:
        return _to_strings(x)
    narrowed = to_narrow(x, target, bool(attrs.get("saturate", 1)))
    if narrowed is not None:
        return narrowed
    if x.dtype.kind == "V" and target != x.dtype:
        x = x.astype(FLOAT32)
    return x.astype(target)


@KERNELS.register("Cast", since=6, check=_check_cast)
def cast(ctx: KernelContext, x: Array) -> Array:
    with np.errstate(all="ignore"):
        return _cast(x, dtypes.from_onnx(int(ctx.attrs["to"])), ctx.attrs)


def _cast_direct(ctx: KernelContext, inputs: Sequence[Any], outputs: Sequence[Any]) -> Direct | None:
    """Between numpy's own numeric types a cast is ``astype`` alone: what :func:`_cast` comes to there."""
    source, target = (
        inputs[0].dtype if inputs[0] is not None else None,
        dtypes.from_onnx(int(ctx.attrs["to"])),
    )
    if source is None or not _numpy_number(source) or not _numpy_number(target):
        return None
    return Direct(operator.methodcaller("astype", target))  # numpy scalars have it too


specialize(cast, _cast_direct)


@KERNELS.register("CastLike", since=15)
def cast_like(ctx: KernelContext, x: Array, like: Array) -> Array:
    with np.errstate(all="ignore"):
        return _cast(x, like.dtype, ctx.attrs)
