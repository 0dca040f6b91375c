"""Tensor methods and operators, defined once as the functions of the same torch name."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..tensor import MATH, Tensor
from .functions import (
    arith,
    compare,
    creation,
    extrema,
    indexing,
    linalg,
    movement,
    pointwise,
    reduce,
    shape,
    softmax,
    statistics,
)
from .mode import is_grad_enabled, no_grad


def _reflected(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    return lambda self, other: fn(other, self)


def in_place(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``x.add_(y)``: compute ``fn(x, y)`` and write it into ``x``.

    While the operation is recorded the backward pass may need ``x``'s old value, so ``x`` then
    takes the result's buffer instead of being overwritten (as torch keeps a copy of it).
    """

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        recording = is_grad_enabled() and (
            self.requires_grad or any(isinstance(a, Tensor) and a.requires_grad for a in args)
        )
        source = self._snapshot() if recording else self
        return self._replace(fn(source, *args, **kwargs), rebind=recording)

    method.__name__ = fn.__name__ + "_"
    return method


def _cast_to(dtype: Any) -> Callable[[Tensor], Tensor]:
    return lambda self: movement.to(self, np.dtype(dtype))


def _length(self: Tensor) -> int:
    if self.ndim == 0:
        raise TypeError("len() of a 0-d tensor")
    return self.shape[0]


def _iterate(self: Tensor) -> Iterator[Tensor]:
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter(shape.unbind(self, 0))


def _fill(self: Tensor, value: Any) -> Tensor:
    with no_grad():
        return self._replace(creation.full_like(self, value), rebind=False)


def _copy(self: Tensor, source: Tensor) -> Tensor:
    with no_grad():
        return self._replace(
            reduce.expand(movement.to(source, self.device, self.dtype), self.shape), rebind=False
        )


METHODS: dict[str, Any] = {
    "T": lambda self: movement.permute(self, list(range(self.ndim))[::-1]),  # read as a property
    "__add__": arith.add,
    "__radd__": _reflected(arith.add),
    "__sub__": arith.sub,
    "__rsub__": _reflected(arith.sub),
    "__mul__": arith.mul,
    "__rmul__": _reflected(arith.mul),
    "__truediv__": arith.div,
    "__rtruediv__": _reflected(arith.div),
    "__pow__": arith.pow,
    "__rpow__": _reflected(arith.pow),
    "__matmul__": linalg.matmul,
    "__rmatmul__": _reflected(linalg.matmul),
    "__neg__": arith.neg,
    "__abs__": arith.abs,
    "__eq__": compare.eq,
    "__ne__": compare.ne,
    "__lt__": compare.lt,
    "__le__": compare.le,
    "__gt__": compare.gt,
    "__ge__": compare.ge,
    "__and__": compare.logical_and,
    "__or__": compare.logical_or,
    "__invert__": compare.logical_not,
    "add": arith.add,
    "sub": arith.sub,
    "mul": arith.mul,
    "div": arith.div,
    "pow": arith.pow,
    "neg": arith.neg,
    "exp": arith.exp,
    "log": arith.log,
    "sqrt": arith.sqrt,
    "abs": arith.abs,
    "relu": arith.relu,
    "sigmoid": arith.sigmoid,
    "tanh": arith.tanh,
    "sin": pointwise.sin,
    "cos": pointwise.cos,
    "erf": pointwise.erf,
    "reciprocal": pointwise.reciprocal,
    "rsqrt": pointwise.rsqrt,
    "log1p": pointwise.log1p,
    "expm1": pointwise.expm1,
    "square": pointwise.square,
    "floor": pointwise.floor,
    "ceil": pointwise.ceil,
    "round": pointwise.round,
    "trunc": pointwise.trunc,
    "sign": pointwise.sign,
    "eq": compare.eq,
    "ne": compare.ne,
    "lt": compare.lt,
    "le": compare.le,
    "gt": compare.gt,
    "ge": compare.ge,
    "sum": reduce.sum,
    "mean": reduce.mean,
    "max": extrema.max,
    "min": extrema.min,
    "amax": extrema.amax,
    "amin": extrema.amin,
    "argmax": extrema.argmax,
    "argmin": extrema.argmin,
    "maximum": extrema.maximum,
    "minimum": extrema.minimum,
    "clamp": extrema.clamp,
    "clip": extrema.clamp,
    "clamp_": in_place(extrema.clamp),
    "clip_": in_place(extrema.clamp),
    "isnan": extrema.isnan,
    "var": statistics.var,
    "std": statistics.std,
    "logsumexp": statistics.logsumexp,
    "norm": statistics.norm,
    "softmax": softmax.softmax,
    "log_softmax": softmax.log_softmax,
    "__getitem__": indexing.getitem,
    "__setitem__": in_place(indexing.index_put),
    "__len__": _length,
    "__iter__": _iterate,
    "gather": indexing.gather,
    "scatter": indexing.scatter,
    "scatter_": in_place(indexing.scatter),
    "scatter_add": indexing.scatter_add,
    "scatter_add_": in_place(indexing.scatter_add),
    "index_select": indexing.index_select,
    "index_add": indexing.index_add,
    "index_add_": in_place(indexing.index_add),
    "masked_fill": indexing.masked_fill,
    "masked_fill_": in_place(indexing.masked_fill),
    "cumsum": indexing.cumsum,
    "narrow": shape.narrow,
    "split": shape.split,
    "chunk": shape.chunk,
    "unbind": shape.unbind,
    "matmul": linalg.matmul,
    "mm": linalg.mm,
    "reshape": movement.reshape,
    "view": movement.reshape,
    "flatten": movement.flatten,
    "expand": reduce.expand,
    "permute": movement.permute,
    "transpose": movement.transpose,
    "t": movement.t,
    "squeeze": movement.squeeze,
    "unsqueeze": movement.unsqueeze,
    "float": _cast_to(np.float32),
    "double": _cast_to(np.float64),
    "half": _cast_to(np.float16),
    "long": _cast_to(np.int64),
    "int": _cast_to(np.int32),
    "bool": _cast_to(bool),
    "add_": in_place(arith.add),
    "sub_": in_place(arith.sub),
    "mul_": in_place(arith.mul),
    "div_": in_place(arith.div),
    "zero_": lambda self: _fill(self, 0),
    "fill_": _fill,
    "copy_": _copy,
    "__iadd__": in_place(arith.add),
    "__isub__": in_place(arith.sub),
    "__imul__": in_place(arith.mul),
    "__itruediv__": in_place(arith.div),
}


def register(methods: dict[str, Any] = METHODS) -> None:
    """Make ``methods`` the functions behind :class:`~spawnml.Tensor`'s methods of the same names."""
    MATH.update(methods)
