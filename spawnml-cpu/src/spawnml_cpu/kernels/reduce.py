"""CPU kernels of the reducing ai.onnx operators: Reduce*, ArgMax/ArgMin, CumSum, softmaxes."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from spawnml.backend import KernelContext
from spawnml.ops.shapes import normalize_axis

from .elementwise import divide, finish, widen
from .table import KERNELS

Array = np.ndarray
Axes = tuple[int, ...] | None
#: ``fn(x, axes, keepdims)``: a reduction over ``axes`` (every axis when None).
Reduction = Callable[[Array, Axes, bool], Array]
FLOAT32 = np.dtype(np.float32)
#: The longest innermost axis whose Max or Min runs as elementwise passes over its slices: numpy's
#: reduce loop pays a call per output element there, which over many short rows is most of it.
SHORT_AXIS = 16


def _lowest(dtype: np.dtype) -> float:
    """The identity of max: -inf, or the smallest integer, or False."""
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _highest(dtype: np.dtype) -> float:
    """The identity of min: +inf, or the largest integer, or True."""
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).max if dtype.kind in "iu" else np.inf


def _sum(x: Array, axes: Axes, keepdims: bool) -> Array:
    return np.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


def _mean(x: Array, axes: Axes, keepdims: bool) -> Array:
    count = math.prod(x.shape[axis] for axis in (range(x.ndim) if axes is None else axes))
    return divide(_sum(x, axes, keepdims), np.array(count, dtype=x.dtype))


def _log_sum_exp(x: Array, axes: Axes, keepdims: bool) -> Array:
    peak = np.max(x, axis=axes, keepdims=True, initial=_lowest(x.dtype))
    shift = np.where(np.isfinite(peak), peak, 0)
    total = np.log(np.sum(np.exp(x - shift), axis=axes, keepdims=True)) + shift
    return total if keepdims else np.squeeze(total, axis=axes)


def _extremum(pick: np.ufunc, identity: Callable[[np.dtype], float]) -> Reduction:
    """Max or Min (``pick``: ``np.maximum`` or ``np.minimum``), exact in any order of comparison."""

    def reduce(x: Array, axes: Axes, keepdims: bool) -> Array:
        length = x.shape[-1] if x.ndim else 0
        if axes is not None and axes == (x.ndim - 1,) and 0 < length <= SHORT_AXIS:
            result = x[..., 0].copy()
            for index in range(1, length):
                pick(result, x[..., index], out=result)
            return result[..., None] if keepdims else result
        return pick.reduce(x, axis=axes, keepdims=keepdims, initial=identity(x.dtype))

    return reduce


_REDUCTIONS: dict[str, Reduction] = {
    "ReduceSum": _sum,
    "ReduceMean": _mean,
    "ReduceMax": _extremum(np.maximum, _lowest),
    "ReduceMin": _extremum(np.minimum, _highest),
    "ReduceProd": lambda x, axes, keep: np.prod(x, axis=axes, keepdims=keep, dtype=x.dtype),
    "ReduceL1": lambda x, axes, keep: _sum(np.abs(x), axes, keep),
    "ReduceL2": lambda x, axes, keep: np.sqrt(_sum(x * x, axes, keep)),
    "ReduceSumSquare": lambda x, axes, keep: _sum(x * x, axes, keep),
    "ReduceLogSum": lambda x, axes, keep: np.log(_sum(x, axes, keep)),
    "ReduceLogSumExp": _log_sum_exp,
}


def _axes(ctx: KernelContext, x: Array, axes: Array | None) -> Axes:
    """The axes to reduce: from the input (newer opsets) or attribute; () when it is a no-op."""
    requested = ctx.attrs.get("axes") if axes is None else axes.reshape(-1).tolist()
    if not requested:
        return () if ctx.attrs.get("noop_with_empty_axes") else None
    return tuple(sorted({normalize_axis(int(axis), x.ndim) for axis in requested}))


def _register_reduction(name: str, fn: Reduction) -> None:
    def kernel(ctx: KernelContext, x: Array, axes: Array | None = None) -> Array:
        with np.errstate(all="ignore"):
            return finish(fn(widen(x), _axes(ctx, x, axes), bool(ctx.attrs["keepdims"])), x.dtype, (x,))

    KERNELS.register(name)(kernel)


def _register_arg(name: str, fn: Callable[..., Array]) -> None:
    def kernel(ctx: KernelContext, x: Array) -> Array:
        axis = normalize_axis(ctx.attrs["axis"], x.ndim)
        keepdims = bool(ctx.attrs["keepdims"])
        if not ctx.attrs.get("select_last_index"):
            return fn(x, axis=axis, keepdims=keepdims).astype(np.int64)
        last = fn(np.flip(x, axis), axis=axis, keepdims=keepdims)
        return (x.shape[axis] - 1 - last).astype(np.int64)

    KERNELS.register(name)(kernel)


for _name, _fn in _REDUCTIONS.items():
    _register_reduction(_name, _fn)
_register_arg("ArgMax", np.argmax)
_register_arg("ArgMin", np.argmin)


@KERNELS.register("CumSum", since=11)
def cumsum(ctx: KernelContext, x: Array, axis: Array) -> Array:
    along = normalize_axis(int(axis.reshape(-1)[0]), x.ndim)
    data = widen(x)
    if ctx.attrs["reverse"]:
        data = np.flip(data, along)
    total = np.cumsum(data, axis=along, dtype=data.dtype)
    if ctx.attrs["exclusive"]:
        total = _shift_forward(total, along)
    if ctx.attrs["reverse"]:
        total = np.flip(total, along)
    return finish(total, x.dtype, (x,))


def _shift_forward(total: Array, axis: int) -> Array:
    """``total`` moved one step along ``axis``, with zeros entering at the start."""
    shifted = np.zeros_like(total)
    target = [slice(None)] * total.ndim
    source = list(target)
    target[axis], source[axis] = slice(1, None), slice(None, -1)
    shifted[tuple(target)] = total[tuple(source)]
    return shifted


#: Spread of values (maximum - minimum) under which a softmax subtracts the maximum of the whole
#: input from every row instead of each row's own: no exp then falls below float32's normal range
#: (e**-80 is 1.8e-35), and two reductions over the whole input cost less than one along an axis.
_SHARED_SHIFT_SPREAD = 80


def _softmax(x: Array, axis: int) -> Array:
    if x.dtype == FLOAT32 and axis == x.ndim - 1 and x.size:
        rows = _softmax_float32_rows(np.ascontiguousarray(x).reshape(-1, x.shape[-1]))
        if rows is not None:
            return rows.reshape(x.shape)
    top = np.max(x, initial=-np.inf)
    if not top - np.min(x, initial=np.inf) < _SHARED_SHIFT_SPREAD:  # also NaNs and infinities
        top = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    exp = np.subtract(x, top)
    np.exp(exp, out=exp)  # in place: each temporary is as large as x
    exp /= np.sum(exp, axis=axis, keepdims=True)
    return exp


def _softmax_float32_rows(x: Array) -> Array | None:
    """The softmax of each row of a float32 matrix on the compiled loops; None where ``x`` holds a
    NaN or +inf (numpy's path gives their rows of NaN). -inf, as a mask gives, takes no weight."""
    maxima, softmax = _softmax_loops()
    tops = np.empty(x.shape[0], FLOAT32)
    if maxima(x, tops) < _MINUS_INFINITY_KEY or not math.isfinite(np.max(tops)):
        return None
    out = np.empty_like(x)
    softmax(x, tops, out)
    return out


#: :func:`_row_maxima` (whose int32 numba returns as an int) and :func:`_softmax_rows`, compiled.
SoftmaxLoops = tuple[Callable[[Array, Array], int | np.int32], Callable[[Array, Array, Array], None]]


@functools.cache
def _softmax_loops() -> SoftmaxLoops:
    """:func:`_row_maxima` and :func:`_softmax_rows` compiled with numba (imported on first use).

    The softmax's sums may be reassociated and its products contracted, and a zero sum (a row of
    only -inf) gives NaN as numpy's division does, not an exception."""
    import numba

    numba.extending.register_jitable(_exp_nonpositive)
    maxima = numba.njit(nogil=True, cache=True)(_row_maxima)
    flags = {"reassoc", "nsz", "contract"}
    softmax = numba.njit(nogil=True, cache=True, fastmath=flags, error_model="numpy")(_softmax_rows)
    return maxima, softmax


#: -inf as the integer :func:`_row_maxima` orders floats by; NaNs with the sign bit set lie below it,
#: other NaNs above +inf's.
_MINUS_INFINITY_KEY = -0x7F800001


def _row_maxima(x: Array, tops: Array) -> np.int32:
    """The maximum of each row of a float32 matrix into ``tops``, and the least element as an
    integer key, in one pass. Floats are compared as integers that order as they do (a float
    loop's maximum does not vectorize): the bits of a negative float, less its sign, inverted."""
    bits = x.view(np.int32)
    least = np.int32(2**31 - 1)
    for r in range(x.shape[0]):
        top = np.int32(-(2**31))
        for j in range(x.shape[1]):
            key = bits[r, j] ^ ((bits[r, j] >> 31) & np.int32(0x7FFFFFFF))
            top = max(top, key)
            least = min(least, key)
        tops[r] = np.int32(top ^ ((top >> 31) & np.int32(0x7FFFFFFF))).view(np.float32)
    return least


def _softmax_rows(x: Array, tops: Array, out: Array) -> None:
    """``out = exp(x - top) / sum(exp(x - top))`` per row of float32 ``x``, ``top`` from ``tops``."""
    for r in range(x.shape[0]):
        total = np.float32(0)
        for j in range(x.shape[1]):
            value = _exp_nonpositive(x[r, j] - tops[r])
            out[r, j] = value
            total += value
        scale = np.float32(1) / total
        for j in range(x.shape[1]):
            out[r, j] *= scale


#: Cephes' single-precision exp: ln 2 in two parts, and the polynomial of exp(r) - 1 - r on
#: [-ln 2 / 2, ln 2 / 2] (relative error below 3e-7 over [-87, 0] against float64's exp).
_LN2_HIGH, _LN2_LOW = np.float32(0.693359375), np.float32(-2.12194440e-4)
_LOG2E = np.float32(1.4426950408889634)
_EXP_POLYNOMIAL = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 0.5)
#: exp(x) is below float32's normal range from here down; the loop gives 0 there.
_EXP_FLOOR = np.float32(-87)


def _exp_nonpositive(x: np.float32) -> np.float32:
    """exp of a float32 ``x <= 0`` without a libm call, so that loops over it vectorize: ``2**n``
    (built in the exponent bits) times ``exp(r)``, ``x = n ln 2 + r``; 0 below :data:`_EXP_FLOOR`
    and for NaN."""
    clamped = x if x > _EXP_FLOOR else _EXP_FLOOR
    n = np.floor(clamped * _LOG2E + np.float32(0.5))
    r = clamped - n * _LN2_HIGH - n * _LN2_LOW
    poly = np.float32(_EXP_POLYNOMIAL[0])
    for coefficient in _EXP_POLYNOMIAL[1:]:
        poly = poly * r + np.float32(coefficient)
    power = np.int32((np.int32(n) + np.int32(127)) << np.int32(23)).view(np.float32)
    value = (poly * r * r + r + np.float32(1)) * power
    return value if x > _EXP_FLOOR else np.float32(0)


def _log_softmax(x: Array, axis: int) -> Array:
    shifted = x - np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _hardmax(x: Array, axis: int) -> Array:
    out = np.zeros_like(x)
    np.put_along_axis(out, np.argmax(x, axis=axis, keepdims=True), 1, axis)
    return out


def _register_softmax(name: str, fn: Callable[[Array, int], Array]) -> None:
    """Before opset 13 the input is seen as 2-D, split before ``axis``; from 13, ``axis`` alone."""

    def coerced(ctx: KernelContext, x: Array) -> Array:
        axis = normalize_axis(ctx.attrs["axis"], x.ndim)
        rows = widen(x).reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
        with np.errstate(all="ignore"):
            return finish(fn(rows, 1).reshape(x.shape), x.dtype, (x,))

    def along_axis(ctx: KernelContext, x: Array) -> Array:
        with np.errstate(all="ignore"):
            return finish(fn(widen(x), normalize_axis(ctx.attrs["axis"], x.ndim)), x.dtype, (x,))

    KERNELS.register(name, until=13)(coerced)
    KERNELS.register(name, since=13)(along_axis)


for _name, _along_axis in {"Softmax": _softmax, "LogSoftmax": _log_softmax, "Hardmax": _hardmax}.items():
    _register_softmax(_name, _along_axis)
