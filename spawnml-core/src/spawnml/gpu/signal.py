"""DFT on the GPU: the transform by its definition, one thread per output value (see
:mod:`spawnml.kernel.library.dft`); the axis and length, shape-like inputs, are read on the host."""

from __future__ import annotations

import math

from ..backend import KernelContext
from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.library.dft import dft as dft_kernel
from ..ops.defs.signal import dft_axis, dft_sizes
from .array import DeviceArray
from .table import FLOATS, GPU_KERNELS, _host


def _flags(node: Node, opset: int) -> str | None:
    bad = [name for name in ("inverse", "onesided") if node.attrs.get(name, 0) not in (0, 1)]
    return f"{', '.join(bad)} must be 0 or 1" if bad else None


def _scalar(ctx: KernelContext, x: DeviceArray) -> int:
    return int(_host(ctx, x).reshape(-1)[0])


@GPU_KERNELS.register("DFT", since=17, check=_flags, dtypes=FLOATS)
def dft(
    ctx: KernelContext, x: DeviceArray, dft_length: DeviceArray | None = None, axis: DeviceArray | None = None
) -> DeviceArray:
    """``(..., 1 or 2)`` real or complex input; complex output, or real from a one-sided inverse."""
    rank = len(x.shape)
    chosen = dft_axis(int(ctx.attrs.get("axis", -2)) if axis is None else _scalar(ctx, axis), rank)
    inverse, onesided = bool(ctx.attrs.get("inverse", 0)), bool(ctx.attrs.get("onesided", 0))
    parts = x.shape[-1]
    if parts not in (1, 2) or (onesided and not inverse and parts == 2):
        raise InvalidArgumentError(
            f"DFT of an input of shape {list(x.shape)}: the last axis holds 1 (real) or 2 (complex) parts, "
            "and a one-sided forward transform takes a real input"
        )
    length = x.shape[chosen]
    size, count = dft_sizes(
        length, None if dft_length is None else _scalar(ctx, dft_length), inverse, onesided
    )
    real = inverse and onesided
    out = ctx.backend.empty((*x.shape[:chosen], count, *x.shape[chosen + 1 : -1], 1 if real else 2), x.dtype)
    if out.size:
        inner = math.prod(x.shape[chosen + 1 : -1])
        k = dft_kernel.specialize(T=x.elem, INVERSE=inverse, HALF=onesided)
        scalars = {"L": length, "N": size, "M": count, "inner": inner, "C": parts}
        ctx.backend.launch_flat(k, [x, out], out.size // (1 if real else 2), **scalars)
    return out
