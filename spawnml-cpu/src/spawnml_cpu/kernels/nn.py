"""Neural-network kernels: matrix products here; convolution, pooling, normalization,
quantization and resizing in the modules imported below."""

from __future__ import annotations

import numpy as np
from spawnml.backend import KernelContext

from . import conv, norm, pool, quant, resize  # noqa: F401  (registration by import)
from .nn_common import matmul, widen
from .table import KERNELS
from .threads import split_matmul


def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b``, cut over the backend's threads where that pays (:func:`.threads.split_matmul`)."""
    split = split_matmul(a, b)
    return matmul(a, b) if split is None else split


@KERNELS.register("MatMul")
def _matmul(ctx: KernelContext, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return product(widen(a), widen(b)).astype(a.dtype, copy=False)


@KERNELS.register("Gemm")
def _gemm(ctx: KernelContext, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> np.ndarray:
    attrs, dtype = ctx.attrs, a.dtype
    a, b = widen(a), widen(b)
    y = product(a.T if attrs["transA"] else a, b.T if attrs["transB"] else b)
    if attrs["alpha"] != 1:
        y *= y.dtype.type(attrs["alpha"])
    if c is not None and attrs["beta"] != 0:
        y += widen(c) * y.dtype.type(attrs["beta"])
    return y.astype(dtype, copy=False)
