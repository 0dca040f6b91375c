"""CPU kernels of the reducing ai.onnx operators: Reduce*, ArgMax/ArgMin, CumSum, softmaxes."""

from __future__ import annotations

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


def _lowest(dtype: np.dtype) -> object:
    """The identity of max: -inf, or the smallest integer, or False."""
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _highest(dtype: np.dtype) -> object:
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


_REDUCTIONS: dict[str, Reduction] = {
    "ReduceSum": _sum,
    "ReduceMean": _mean,
    "ReduceMax": lambda x, axes, keep: np.max(x, axis=axes, keepdims=keep, initial=_lowest(x.dtype)),
    "ReduceMin": lambda x, axes, keep: np.min(x, axis=axes, keepdims=keep, initial=_highest(x.dtype)),
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
    axis = normalize_axis(int(axis.reshape(-1)[0]), x.ndim)
    data = widen(x)
    if ctx.attrs["reverse"]:
        data = np.flip(data, axis)
    total = np.cumsum(data, axis=axis, dtype=data.dtype)
    if ctx.attrs["exclusive"]:
        total = _shift_forward(total, axis)
    if ctx.attrs["reverse"]:
        total = np.flip(total, axis)
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
    top = np.max(x, initial=-np.inf)
    if not top - np.min(x, initial=np.inf) < _SHARED_SHIFT_SPREAD:  # also NaNs and infinities
        top = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    exp = np.subtract(x, top)
    np.exp(exp, out=exp)  # in place: each temporary is as large as x
    exp /= np.sum(exp, axis=axis, keepdims=True)
    return exp


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


for _name, _fn in {"Softmax": _softmax, "LogSoftmax": _log_softmax, "Hardmax": _hardmax}.items():
    _register_softmax(_name, _fn)
