"""Neural-network kernels: matrix products here; convolution, pooling, normalization,
quantization and resizing in the modules imported below."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from spawnml.backend import KernelContext
from spawnml.ops.schema import TensorType
from spawnml.plan_compiler import Direct, specialize

from . import conv, norm, pool, quant, resize  # noqa: F401  (registration by import)
from .nn_common import compute_dtype, matmul, widen
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
        c = widen(c)
        y += c if attrs["beta"] == 1 else c * y.dtype.type(attrs["beta"])  # c * 1 is c, bit for bit
    return y.astype(dtype, copy=False)


def _one_wide_type(inputs: Sequence[TensorType | None]) -> np.dtype | None:
    """The element type of every given input where shape inference knows it to be one and the same
    type that the kernels compute in as it is (float32 or float64), else None."""
    known = [value for value in inputs if value is not None]
    types = {value.dtype for value in known}
    if len(types) != 1 or any(value.shape is None for value in known):
        return None
    (dtype,) = types
    return dtype if dtype is not None and dtype.kind == "f" and compute_dtype(dtype) == dtype else None


def _matmul_direct(
    ctx: KernelContext, inputs: Sequence[TensorType | None], outputs: Sequence[TensorType | None]
) -> Direct | None:
    """The product itself, where the inputs are known to be of one type computed as it is."""
    return Direct(matmul) if _one_wide_type(inputs) is not None else None


def _gemm_direct(
    ctx: KernelContext, inputs: Sequence[TensorType | None], outputs: Sequence[TensorType | None]
) -> Direct | None:
    """:func:`_gemm` without its widening and attribute reads, where the inputs are known to be of
    one type computed as it is."""
    dtype = _one_wide_type(inputs)
    if dtype is None:
        return None
    attrs = ctx.attrs
    trans_a, trans_b = bool(attrs["transA"]), bool(attrs["transB"])
    alpha, beta = dtype.type(attrs["alpha"]), dtype.type(attrs["beta"])
    scaled, added = attrs["alpha"] != 1, attrs["beta"] != 0
    plain_bias = attrs["beta"] == 1

    def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> np.ndarray:
        y = matmul(a.T if trans_a else a, b.T if trans_b else b)
        if scaled:
            y *= alpha
        if c is not None and added:
            y += c if plain_bias else c * beta
        return y

    return Direct(gemm)


specialize(_matmul, _matmul_direct)
specialize(_gemm, _gemm_direct)
