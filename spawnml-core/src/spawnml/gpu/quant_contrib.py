"""The fused dynamic products onnxruntime's graph optimizer saves (``com.microsoft``
DynamicQuantizeMatMul and MatMulIntegerToFloat) on the GPU, as onnxruntime computes them: the
product exact in int32 (:func:`.quant.matmul_integer`), then times ``a_scale * b_scale`` (per
column where ``b_scale`` is) in float32, plus the bias, in one generated chain.
"""

from __future__ import annotations

from ..kernel.library.chain import step
from ..ops.defs.contrib import MS
from .array import DeviceArray
from .fused import run_chain
from .quant import QUANTIZED, dynamic_quantize, matmul_integer
from .table import FLOATS, GPU_KERNELS, GPUContext

EIGHT_BIT = QUANTIZED[:2]


def _scaled(
    ctx: GPUContext, total: DeviceArray, a_scale: DeviceArray, b_scale: DeviceArray, bias: DeviceArray | None
) -> DeviceArray:
    """int32 ``total`` times ``a_scale * b_scale`` in float32, plus ``bias`` where given."""
    b_scale = b_scale.view((b_scale.size,) if b_scale.size > 1 else ())
    inputs = [total, a_scale.view(()), b_scale, *([] if bias is None else [bias])]
    first = len(inputs)
    steps = [
        step("Mul", [1, 2], "float32"),  # first: the scale
        step("Cast", [0], "float32"),
        step("Mul", [first + 1, first], "float32"),
    ]
    if bias is not None:
        steps.append(step("Add", [first + 2, 3], "float32"))
    return run_chain(ctx, tuple(steps), inputs, "scaled_integer_product")


@GPU_KERNELS.register("DynamicQuantizeMatMul", domain=MS, dtypes=FLOATS)
def dynamic_quantize_matmul(
    ctx: GPUContext,
    a: DeviceArray,
    b: DeviceArray,
    b_scale: DeviceArray,
    b_zero_point: DeviceArray | None = None,
    bias: DeviceArray | None = None,
) -> DeviceArray:
    """``A`` quantized to uint8 by DynamicQuantizeLinear's rules (over all of it), times ``B``."""
    quantized, a_scale, a_zero_point = dynamic_quantize(ctx, a)
    return _scaled(ctx, matmul_integer(ctx, quantized, b, a_zero_point, b_zero_point), a_scale, b_scale, bias)


@GPU_KERNELS.register("MatMulIntegerToFloat", domain=MS, dtypes=EIGHT_BIT)
def matmul_integer_to_float(
    ctx: GPUContext,
    a: DeviceArray,
    b: DeviceArray,
    a_scale: DeviceArray,
    b_scale: DeviceArray,
    a_zero_point: DeviceArray | None = None,
    b_zero_point: DeviceArray | None = None,
    bias: DeviceArray | None = None,
) -> DeviceArray:
    """``(A - a_zero_point) @ (B - b_zero_point)`` in int32, times the scales, plus the bias."""
    a_zero = None if a_zero_point is None else a_zero_point.view(())
    return _scaled(ctx, matmul_integer(ctx, a, b, a_zero, b_zero_point), a_scale, b_scale, bias)
