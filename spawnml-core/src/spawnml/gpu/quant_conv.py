"""ConvInteger and QLinearConv on the GPU: the zero-point-shifted 8-bit operands convolved in int32
(exact: the direct convolution kernel accumulates in the type it is given), QLinearConv's sums then
requantized by one generated chain, as QLinearMatMul's are.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ..errors import InvalidArgumentError
from ..kernel.ir import Kernel, i32
from ..kernel.library.chain import step
from ..kernel.library.conv import conv_direct
from .array import DeviceArray
from .fused import run_chain
from .quant import QUANTIZED, requantized
from .table import GPU_KERNELS, GPUContext
from .vision import Windows

EIGHT_BIT = QUANTIZED[:2]


@cache
def _kernel(constants: tuple[tuple[str, int], ...]) -> Kernel:
    return conv_direct.specialize(T=i32, **dict(constants))


def _shifted(ctx: GPUContext, x: DeviceArray, zero_point: DeviceArray | None, rank: int) -> DeviceArray:
    """``x - zero_point`` in int32; a zero point of several values is one per slice of axis 0."""
    if zero_point is None:
        return run_chain(ctx, (step("Cast", [0], "int32"),), [x], "to_int32")
    if zero_point.size > 1:
        zero_point = zero_point.view((zero_point.size, *[1] * (rank - 1)))
    return run_chain(ctx, (step("Sub", [0, 1], "int32"),), [x, zero_point], "shifted")


def integer_conv(
    ctx: GPUContext,
    x: DeviceArray,
    w: DeviceArray,
    x_zero_point: DeviceArray | None,
    w_zero_point: DeviceArray | None,
    bias: DeviceArray | None,
) -> DeviceArray:
    """The int32 convolution of the shifted operands, plus an int32 ``bias`` per output channel."""
    if x_zero_point is not None and x_zero_point.size != 1:
        raise InvalidArgumentError(f"{ctx.node.op_type} takes one x_zero_point, not {x_zero_point.size}")
    kernel = [int(k) for k in ctx.attrs.get("kernel_shape") or w.shape[2:]]
    windows = Windows.of(ctx, x, kernel)
    groups = int(ctx.attrs.get("group", 1))
    (batch, channels), out_channels = x.shape[:2], w.shape[0]
    if channels != w.shape[1] * groups or out_channels % groups:
        raise InvalidArgumentError(
            f"weight of shape {list(w.shape)} does not fit {channels} channels in {groups} groups"
        )
    y = ctx.backend.empty((batch, out_channels, *windows.out[3 - len(kernel) :]), np.dtype(np.int32))
    if bias is None:
        bias = ctx.backend.constant(np.zeros(out_channels, np.int32), np.int32)
    buffers = [
        _shifted(ctx, x, x_zero_point, len(x.shape)),
        _shifted(ctx, w, w_zero_point, len(w.shape)),
        bias,
        y,
    ]
    scalars = {"C": channels, "M": out_channels, "G": groups, **windows.scalars}
    ctx.backend.launch_flat(_kernel(windows.constants), buffers, y.size, **scalars)
    return y


@GPU_KERNELS.register("ConvInteger", since=10, dtypes=EIGHT_BIT)
def conv_integer(
    ctx: GPUContext,
    x: DeviceArray,
    w: DeviceArray,
    x_zero_point: DeviceArray | None = None,
    w_zero_point: DeviceArray | None = None,
) -> DeviceArray:
    return integer_conv(ctx, x, w, x_zero_point, w_zero_point, None)


@GPU_KERNELS.register("QLinearConv", since=10, dtypes=EIGHT_BIT)
def qlinear_conv(
    ctx: GPUContext,
    x: DeviceArray,
    x_scale: DeviceArray,
    x_zero_point: DeviceArray,
    w: DeviceArray,
    w_scale: DeviceArray,
    w_zero_point: DeviceArray,
    y_scale: DeviceArray,
    y_zero_point: DeviceArray,
    bias: DeviceArray | None = None,
) -> DeviceArray:
    """The int32 sums (with ``bias``) requantized: ``round(sum * (x_scale * w_scale / y_scale)) +
    y_zero_point`` saturated to ``y``'s type, the multiplier in float32, ``w_scale`` per tensor or
    per output channel."""
    total = integer_conv(ctx, x, w, x_zero_point, w_zero_point, bias)
    if w_scale.size > 1:
        w_scale = w_scale.view((w_scale.size, *[1] * (len(total.shape) - 2)))
    return requantized(ctx, total, x_scale, w_scale, y_scale, y_zero_point, "qlinear_conv")
