"""New tensors: from data, filled, ranges and random, with torch's defaults (float32, int64)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...tensor import Tensor, backend_named, capturing
from .promotion import DEFAULT_FLOAT, DEFAULT_INT

_generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Seed the generator behind ``rand``, ``randn``, ``randint``, dropout and weight init."""
    global _generator
    _generator = np.random.default_rng(seed)


def generator() -> np.random.Generator:
    """The generator random operations draw from."""
    if capturing.recorder is not None:
        capturing.recorder.random_draw()
    return _generator


def _default_dtype(data: Any) -> np.dtype:
    array = np.asarray(data)
    if array.dtype.kind == "f" and array.dtype != np.float64:
        return array.dtype
    return {"b": np.dtype(bool), "f": DEFAULT_FLOAT, "u": array.dtype, "i": DEFAULT_INT}.get(
        array.dtype.kind, array.dtype
    )


def _place(array: np.ndarray, device: str, requires_grad: bool) -> Tensor:
    backend = backend_named(device)
    return Tensor(backend.from_numpy(np.asarray(array, order="C")), backend, requires_grad=requires_grad)


def tensor(data: Any, dtype: Any = None, device: str = "cpu", requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, numpy arrays, tensors).

    Python floats become float32 and ints int64 unless ``dtype`` says otherwise, as in torch;
    float arrays keep their precision except float64 lists of Python numbers.
    """
    if isinstance(data, Tensor):
        data = data.detach().numpy()
    if isinstance(data, np.ndarray):
        chosen = np.dtype(dtype) if dtype is not None else data.dtype
    else:
        chosen = np.dtype(dtype) if dtype is not None else _default_dtype(data)
    return _place(np.array(data, dtype=chosen, copy=True), device, requires_grad)


def from_numpy(array: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with ``array``."""
    return Tensor(backend_named("cpu").from_numpy(array), backend_named("cpu"))


def _sizes(size: tuple[Any, ...]) -> tuple[int, ...]:
    return tuple(size[0]) if len(size) == 1 and isinstance(size[0], Sequence) else tuple(size)


def full(
    size: Sequence[int],
    fill_value: Any,
    *,
    dtype: Any = None,
    device: str = "cpu",
    requires_grad: bool = False,
) -> Tensor:
    chosen = np.dtype(dtype) if dtype is not None else _default_dtype(fill_value)
    return _place(np.full(tuple(size), fill_value, chosen), device, requires_grad)


def zeros(*size: Any, dtype: Any = None, device: str = "cpu", requires_grad: bool = False) -> Tensor:
    return full(_sizes(size), 0, dtype=dtype or DEFAULT_FLOAT, device=device, requires_grad=requires_grad)


def ones(*size: Any, dtype: Any = None, device: str = "cpu", requires_grad: bool = False) -> Tensor:
    return full(_sizes(size), 1, dtype=dtype or DEFAULT_FLOAT, device=device, requires_grad=requires_grad)


def empty(*size: Any, dtype: Any = None, device: str = "cpu", requires_grad: bool = False) -> Tensor:
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def _like(x: Tensor, dtype: Any, device: str | None) -> dict[str, Any]:
    return {"dtype": dtype or x.dtype, "device": device or x.device}


def zeros_like(
    input: Tensor, *, dtype: Any = None, device: str | None = None, requires_grad: bool = False
) -> Tensor:
    return full(input.shape, 0, **_like(input, dtype, device), requires_grad=requires_grad)


def ones_like(
    input: Tensor, *, dtype: Any = None, device: str | None = None, requires_grad: bool = False
) -> Tensor:
    return full(input.shape, 1, **_like(input, dtype, device), requires_grad=requires_grad)


def full_like(
    input: Tensor,
    fill_value: Any,
    *,
    dtype: Any = None,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return full(input.shape, fill_value, **_like(input, dtype, device), requires_grad=requires_grad)


def arange(
    start: float,
    end: float | None = None,
    step: float = 1,
    *,
    dtype: Any = None,
    device: str = "cpu",
    requires_grad: bool = False,
) -> Tensor:
    """``start, start + step, ...`` below ``end`` (``arange(n)`` counts from 0); int64 for int arguments."""
    if end is None:
        start, end = 0, start
    chosen = np.dtype(dtype) if dtype is not None else _default_dtype([start, end, step])
    return _place(np.arange(start, end, step).astype(chosen), device, requires_grad)


def rand(*size: Any, dtype: Any = None, device: str = "cpu", requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1)."""
    chosen = np.dtype(dtype or DEFAULT_FLOAT)
    return _place(generator().random(_sizes(size)).astype(chosen), device, requires_grad)


def randn(*size: Any, dtype: Any = None, device: str = "cpu", requires_grad: bool = False) -> Tensor:
    """Standard normal samples."""
    chosen = np.dtype(dtype or DEFAULT_FLOAT)
    return _place(generator().standard_normal(_sizes(size)).astype(chosen), device, requires_grad)


def randint(
    low: int,
    high: int | Sequence[int] | None = None,
    size: Sequence[int] = (),
    *,
    dtype: Any = None,
    device: str = "cpu",
) -> Tensor:
    """Integers drawn uniformly from [low, high) (``randint(high, size)`` draws from [0, high))."""
    if isinstance(high, Sequence):  # randint(high, size)
        size, high, low = high, low, 0
    elif high is None:
        low, high = 0, low
    return _place(
        generator().integers(low, high, tuple(size)).astype(np.dtype(dtype or DEFAULT_INT)), device, False
    )


def randperm(n: int, *, dtype: Any = None, device: str = "cpu") -> Tensor:
    return _place(generator().permutation(n).astype(np.dtype(dtype or DEFAULT_INT)), device, False)
