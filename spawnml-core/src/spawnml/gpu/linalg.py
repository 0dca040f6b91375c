"""Det on the GPU: one thread per matrix eliminates a scratch copy (see
:mod:`spawnml.kernel.library.linalg`)."""

from __future__ import annotations

import math

from ..errors import InvalidArgumentError
from ..kernel.library.linalg import determinant
from .array import DeviceArray
from .shapes import contiguous_strides
from .table import FLOATS, GPU_KERNELS, GPUContext, copy_strided


@GPU_KERNELS.register("Det", since=11, dtypes=FLOATS)
def det(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    """The determinants of ``x``'s ``(..., n, n)`` matrices."""
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
        raise InvalidArgumentError(f"Det takes square matrices (..., n, n), not shape {list(x.shape)}")
    out = ctx.backend.empty(x.shape[:-2], x.dtype)
    if out.size:
        scratch = ctx.backend.empty(x.shape, x.dtype)
        copy_strided(ctx, x, scratch, x.shape, contiguous_strides(x.shape), contiguous_strides(x.shape))
        k = determinant.specialize(T=x.elem)
        ctx.backend.launch_flat(k, [scratch, out], math.prod(x.shape[:-2]), N=x.shape[-1])
    return out
