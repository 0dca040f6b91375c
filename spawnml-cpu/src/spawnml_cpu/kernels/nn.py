"""Neural-network kernels: matrix products here; convolution, pooling, normalization,
quantization and resizing in the modules imported below."""

from __future__ import annotations

import numpy as np
from spawnml.backend import KernelContext

from . import conv, norm, pool, quant, resize  # noqa: F401  (registration by import)
from .nn_common import matmul, widen
from .table import KERNELS


@KERNELS.register("MatMul")
def _matmul(ctx: KernelContext, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return matmul(widen(a), widen(b)).astype(a.dtype, copy=False)


@KERNELS.register("Gemm")
def _gemm(ctx: KernelContext, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> np.ndarray:
    attrs, dtype = ctx.attrs, a.dtype
    a, b = widen(a), widen(b)
    y = matmul(a.T if attrs["transA"] else a, b.T if attrs["transB"] else b)
    if attrs["alpha"] != 1:
        y *= y.dtype.type(attrs["alpha"])
    if c is not None and attrs["beta"] != 0:
        y += widen(c) * y.dtype.type(attrs["beta"])
    return y.astype(dtype, copy=False)
