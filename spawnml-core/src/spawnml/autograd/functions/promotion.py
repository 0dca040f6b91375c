"""Turning Python numbers into tensors and picking result types as torch does."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...tensor import Tensor
from ..dispatch import constant, run

#: torch's default element types for Python floats and ints.
DEFAULT_FLOAT = np.dtype(np.float32)
DEFAULT_INT = np.dtype(np.int64)

#: What the binary operators take: a tensor, or a Python scalar promoted against the other operand.
Operand = Tensor | float | int | bool

_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _category(dtype: np.dtype) -> int:
    return _CATEGORY[dtype.kind]


def _scalar_dtype(value: Any) -> np.dtype:
    if isinstance(value, bool | np.bool_):
        return np.dtype(bool)
    if isinstance(value, int | np.integer):
        return DEFAULT_INT
    return DEFAULT_FLOAT


def result_type(*operands: Tensor | float | int | bool) -> np.dtype:
    """The element type of a binary operation's result, by torch's rules.

    A higher category (bool < integer < float) wins; within the winning category tensors with
    dimensions decide over 0-dim tensors, which decide over Python numbers.
    """
    ranked: list[tuple[int, int, np.dtype]] = []  # (category, priority, dtype)
    for x in operands:
        if isinstance(x, Tensor):
            ranked.append((_category(x.dtype), 2 if x.ndim else 1, x.dtype))
        else:
            dtype = _scalar_dtype(x)
            ranked.append((_category(dtype), 0, dtype))
    top = max(category for category, _, _ in ranked)
    best = max(priority for category, priority, _ in ranked if category == top)
    chosen = [dtype for category, priority, dtype in ranked if category == top and priority == best]
    if best == 0:
        return DEFAULT_FLOAT if top == 2 else chosen[0]
    result = chosen[0]
    for dtype in chosen[1:]:
        result = np.promote_types(result, dtype)
    return result


def as_tensor(value: Tensor | float | int | bool, like: Tensor, dtype: np.dtype) -> Tensor:
    """``value`` as a tensor of ``dtype`` on ``like``'s device (a cast for tensors, constant otherwise)."""
    if isinstance(value, Tensor):
        return value if value.dtype == dtype else cast(value, dtype)
    return constant(value, like, dtype)


def cast(x: Tensor, dtype: Any) -> Tensor:
    """``x`` converted to ``dtype`` (no gradient: see ``Tensor.to`` for the differentiable form)."""
    from ...dtypes import to_onnx

    return run("Cast", [x], to=to_onnx(np.dtype(dtype)))


def operands(a: Operand, b: Operand, float_result: bool = False) -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` as tensors of their common type (a floating one if ``float_result``)."""
    like = a if isinstance(a, Tensor) else b
    assert isinstance(like, Tensor)
    dtype = result_type(a, b)
    if float_result and dtype.kind not in "fc":
        dtype = result_type(a, b, 1.0)
    return as_tensor(a, like, dtype), as_tensor(b, like, dtype)
