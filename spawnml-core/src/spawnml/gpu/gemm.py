"""Gemm on the GPU: ``alpha * A' @ B' + beta * C`` as the tiled matrix product, then one
generated elementwise launch for the scaling and the broadcast ``C``."""

from __future__ import annotations

import numpy as np

from ..backend import KernelContext
from ..kernel.library.chain import Step, step
from .array import DeviceArray
from .fused import run_chain
from .table import FLOATS, GPU_KERNELS, matmul, permuted


@GPU_KERNELS.register("Gemm", dtypes=FLOATS)
def gemm(ctx: KernelContext, a: DeviceArray, b: DeviceArray, c: DeviceArray | None = None) -> DeviceArray:
    a = permuted(ctx, a, [1, 0]) if ctx.attrs.get("transA", 0) else a
    b = permuted(ctx, b, [1, 0]) if ctx.attrs.get("transB", 0) else b
    product = matmul(ctx, a, b)
    alpha, beta = float(ctx.attrs.get("alpha", 1.0)), float(ctx.attrs.get("beta", 1.0))
    inputs = [product]
    if alpha != 1.0:
        inputs.append(ctx.backend.from_numpy(np.array(alpha, np.float32)))
    if c is not None and beta != 0.0:
        inputs.append(c)
        if beta != 1.0:
            inputs.append(ctx.backend.from_numpy(np.array(beta, np.float32)))
    if len(inputs) == 1:
        return product
    return run_chain(ctx, _epilogue(alpha != 1.0, len(inputs)), inputs, "gemm_epilogue")


def _epilogue(scaled: bool, inputs: int) -> tuple[Step, ...]:
    """Steps over ``[product, alpha?, C, beta?]``: ``product * alpha`` and ``+ C * beta`` as given."""
    steps: list[Step] = []
    value, c = 0, 2 if scaled else 1
    if scaled:
        steps.append(step("Mul", [0, 1], "float32"))
        value = inputs
    if c < inputs:
        term = c
        if c + 1 < inputs:
            steps.append(step("Mul", [c, c + 1], "float32"))
            term = inputs + len(steps) - 1
        steps.append(step("Add", [value, term], "float32"))
    return tuple(steps)
