"""Helpers shared by the neural-network kernels: compute types and sliding windows."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from spawnml.dtypes import HALF_FLOAT_NAMES
from spawnml.ops.shapes import sliding_windows, window_attrs

from .threads import blas_for, one_blas_thread

#: Element types numpy computes slowly or imprecisely; kernels work on them in float32.
_WIDENED = HALF_FLOAT_NAMES
FLOAT32 = np.dtype(np.float32)


@functools.lru_cache(maxsize=256)
def is_widened(dtype: np.dtype) -> bool:
    """Whether kernels compute ``dtype`` in float32 (remembered: numpy spells a type's name out in
    Python, which costs more than a small kernel)."""
    return dtype.name in _WIDENED


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The type to compute in for inputs of ``dtype`` (float32 for 16-bit floats)."""
    return FLOAT32 if is_widened(dtype) else dtype


def widen(array: np.ndarray) -> np.ndarray:
    """``array`` in its compute type, without copying when it already is."""
    return array.astype(compute_dtype(array.dtype), copy=False)


def per_channel(values: np.ndarray, rank: int) -> np.ndarray:
    """A ``(C,)`` vector shaped to broadcast against ``(N, C, *spatial)`` of ``rank``."""
    return values.reshape(-1, *(1,) * (rank - 2))


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``numpy.matmul``, as one 2-D GEMM when ``b`` is a matrix (numpy loops over batches), on as
    many BLAS threads as pays (see :mod:`.threads`), matrix-vector products on one.

    OpenBLAS cuts the outputs of a matrix-vector product into one share per thread and computes
    the last few of each share with a narrower kernel that rounds differently, so equal weight
    columns would give outputs an ulp apart at places that follow the thread count (a Softmax of
    large equal logits turns that into zeros).
    """
    work = a.size * (b.shape[-1] if b.ndim > 1 else 1)  # multiply-adds, batches of a alone
    with one_blas_thread() if _is_matrix_vector(a, b) else blas_for(work):
        if a.ndim > 2 and b.ndim == 2:
            rows = math.prod(a.shape[:-1])  # explicit: -1 is ambiguous when a is empty
            return np.matmul(a.reshape(rows, a.shape[-1]), b).reshape(*a.shape[:-1], b.shape[-1])
        return np.matmul(a, b)


def _is_matrix_vector(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether each product of ``a @ b`` has one row or one column (BLAS runs it as a GEMV)."""
    rows = math.prod(a.shape[:-1]) if b.ndim == 2 else (a.shape[-2] if a.ndim > 1 else 1)
    return rows == 1 or b.ndim == 1 or b.shape[-1] == 1


def grouped_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``a (G, M, K) @ b (G, K, N)`` as one 2-D GEMM per group, into ``out`` if given."""
    if out is None:
        out = np.empty((a.shape[0], a.shape[1], b.shape[2]), dtype=np.result_type(a, b))
    for group in range(a.shape[0]):
        np.matmul(a[group], b[group], out=out[group])
    return out


@dataclass(frozen=True)
class Windows:
    """Where the windows of a convolution or pooling node lie along each spatial axis."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begins: tuple[int, ...]
    ends: tuple[int, ...]
    out: tuple[int, ...]

    @classmethod
    def of(cls, attrs: dict[str, Any], sizes: Sequence[int], kernel: Sequence[int]) -> Windows:
        """The windows of a node with ``attrs`` over spatial ``sizes`` (remembered: a node meets
        the same shapes run after run)."""
        get = attrs.get
        settings = tuple([_hashable(get(name)) for name in _WINDOW_ATTRS])
        return _windows(tuple(sizes), tuple(kernel), settings)

    def starts(self, axis: int) -> np.ndarray:
        """Where each window of ``axis`` starts, in input coordinates."""
        return np.arange(self.out[axis]) * self.strides[axis] - self.begins[axis]

    def taps(self, axis: int) -> np.ndarray:
        """Input coordinates ``(out, kernel)`` of every tap of every window on ``axis``."""
        return self.starts(axis)[:, None] + np.arange(self.kernel[axis]) * self.dilations[axis]

    def each_tap(self, x: np.ndarray, fill: Any = 0) -> Iterator[np.ndarray]:
        """For each kernel tap in row-major order, the ``(N, C, *out)`` values it reads."""
        view = self.view(x, fill)
        for tap in np.ndindex(*self.kernel):
            yield view[(..., *tap)]

    def view(self, x: np.ndarray, fill: Any = 0) -> np.ndarray:
        """A ``(N, C, *out, *kernel)`` view of the windows of ``x`` padded with ``fill``."""
        sizes = x.shape[2:]
        extents = [(k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations, strict=True)]
        needed = [(o - 1) * s + e for o, s, e in zip(self.out, self.strides, extents, strict=True)]
        widths = [(b, max(n - b - size, 0)) for b, n, size in zip(self.begins, needed, sizes, strict=True)]
        if any(b or e for b, e in widths):
            x = np.pad(x, [(0, 0), (0, 0), *widths], constant_values=fill)
        view = sliding_window_view(x, extents, axis=tuple(range(2, x.ndim)))
        return view[
            (
                slice(None),
                slice(None),
                *(slice(0, n - e + 1, s) for n, e, s in zip(needed, extents, self.strides, strict=True)),
                *(slice(None, None, d) for d in self.dilations),
            )
        ]


#: The attributes that place a convolution's or pooling's windows.
_WINDOW_ATTRS = ("strides", "dilations", "pads", "auto_pad", "ceil_mode")


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, (list, np.ndarray)) else value


@functools.lru_cache(maxsize=1024)
def _windows(sizes: tuple[int, ...], kernel: tuple[int, ...], settings: tuple[Any, ...]) -> Windows:
    """The windows of a node whose :data:`_WINDOW_ATTRS` are ``settings`` (None where absent)."""
    attrs = {name: value for name, value in zip(_WINDOW_ATTRS, settings, strict=True) if value is not None}
    strides, dilations, _ = window_attrs(attrs, kernel)
    axes = sliding_windows(sizes, attrs, kernel)
    return Windows(
        kernel,
        tuple(strides),
        tuple(dilations),
        tuple(begin for _, begin, _ in axes),
        tuple(end for _, _, end in axes),
        tuple(out for out, _, _ in axes),
    )
