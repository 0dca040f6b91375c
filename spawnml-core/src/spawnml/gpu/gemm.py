"""Gemm on the GPU: ``alpha * A' @ B' + beta * C`` as the tiled matrix product (a transposed ``B``
too large for one binding taken in parts), then one generated elementwise launch for the scaling
and the broadcast ``C``."""

from __future__ import annotations

import math

import numpy as np

from ..errors import DeviceMemoryError
from ..kernel.library.chain import Step, step
from .array import DeviceArray
from .fused import run_chain
from .table import FLOATS, GPU_KERNELS, GPUContext, copy_strided, matmul, permuted


@GPU_KERNELS.register("Gemm", dtypes=FLOATS)
def gemm(ctx: GPUContext, a: DeviceArray, b: DeviceArray, c: DeviceArray | None = None) -> DeviceArray:
    a = permuted(ctx, a, [1, 0]) if ctx.attrs.get("transA", 0) else a
    product = times_transposed(ctx, a, b) if ctx.attrs.get("transB", 0) else matmul(ctx, a, b)
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


def times_transposed(ctx: GPUContext, a: DeviceArray, b: DeviceArray) -> DeviceArray:
    """``a @ b.T``; a ``b`` too large for one kernel to bind is taken in windows of its rows (a fully
    connected layer's weight), each product copied into its columns of the result."""
    runtime = ctx.backend.runtime
    n, k = b.shape
    row_bytes = k * b.elem.bits // 8
    if n * row_bytes <= runtime.max_buffer_bytes:
        return matmul(ctx, a, permuted(ctx, b, [1, 0]))
    aligned = runtime.window_alignment // math.gcd(row_bytes, runtime.window_alignment)
    rows = runtime.max_buffer_bytes // row_bytes // aligned * aligned
    if not rows:
        raise DeviceMemoryError(f"a row of {row_bytes:,} bytes of a {b.dtype} tensor is past one binding")
    out = ctx.backend.empty((a.shape[0], n), a.dtype)
    for start in range(0, n, rows):
        count = min(rows, n - start)
        part = matmul(ctx, a, permuted(ctx, b.window(start * k, (count, k)), [1, 0]))
        copy_strided(ctx, part, out, part.shape, (count, 1), (n, 1), dst_offset=start)
    return out


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
