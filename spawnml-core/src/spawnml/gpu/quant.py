"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear on the GPU to and from 2- to 16-bit
integers and the 8- and 4-bit floats, as generated elementwise chains (rounded to the floats by
:mod:`.narrow`); MatMulInteger and QLinearMatMul as the int32 matrix product of the shifted
operands, requantized by one more chain.

A scale or zero point applies per tensor, per slice along ``axis`` (a view), or per block of
``block_size`` along it (gathered to the axis' length first).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..dtypes import from_onnx
from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.ir import f32
from ..kernel.library.chain import step
from .array import NARROW_FLOATS, NARROW_INTEGERS, DeviceArray
from .fused import run_chain
from .narrow import narrowed
from .reduce import reduce
from .shapes import axis_index
from .table import FLOATS, GPU_KERNELS, GPUContext, matmul, take

#: The integer types a quantized tensor may have on the GPU.
QUANTIZED = (*(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16)), *NARROW_INTEGERS)
#: The types QuantizeLinear quantizes to on the GPU: those, and the 8- and 4-bit floats.
QUANTIZED_TO = (*QUANTIZED, *NARROW_FLOATS)


def _check(node: Node, opset: int) -> str | None:
    code = node.attrs.get("output_dtype", 0)
    if code and from_onnx(int(code)) not in QUANTIZED_TO:
        return f"output_dtype {from_onnx(int(code))} is not one of {', '.join(map(str, QUANTIZED_TO))}"
    if node.attrs.get("precision", 0) not in (0, 1):
        return f"precision={node.attrs['precision']}: the GPU computes in float32 only"
    return None


def _along(ctx: GPUContext, param: DeviceArray, shape: tuple[int, ...]) -> DeviceArray:
    """A scale or zero point shaped to broadcast against ``shape``: per tensor, axis or block."""
    block = int(ctx.attrs.get("block_size", 0))
    if param.size == 1 and not block:
        return param.view(())
    axis = axis_index(int(ctx.attrs.get("axis", 1)), len(shape))
    if block:
        owner = np.arange(shape[axis], dtype=np.int32) // block
        if len(param.shape) != len(shape) or param.shape[axis] * block < shape[axis]:
            raise InvalidArgumentError(
                f"a blocked scale of shape {list(param.shape)} does not cover {list(shape)} "
                f"in blocks of {block}"
            )
        return take(ctx, param, ctx.backend.from_numpy(owner), axis)
    if param.size != shape[axis]:
        raise InvalidArgumentError(f"{param.size} scales for axis {axis} of length {shape[axis]}")
    return param.view((param.size, *[1] * (len(shape) - axis - 1)))


@GPU_KERNELS.register("QuantizeLinear", since=10, check=_check, dtypes=FLOATS)
def quantize(
    ctx: GPUContext, x: DeviceArray, scale: DeviceArray, zero_point: DeviceArray | None = None
) -> DeviceArray:
    """``saturate(round_half_even(x / scale) + zero_point)`` in the zero point's type (else
    ``output_dtype``, else uint8); for an 8- or 4-bit float ``x / scale + zero_point`` rounded to
    it, saturating to its range unless ``saturate`` is 0."""
    code = ctx.attrs.get("output_dtype", 0)
    dtype = (
        zero_point.dtype if zero_point is not None else from_onnx(int(code)) if code else np.dtype(np.uint8)
    )
    if dtype not in QUANTIZED_TO:
        raise InvalidArgumentError(
            f"QuantizeLinear to {dtype} on the GPU; it takes {list(map(str, QUANTIZED_TO))}"
        )
    zero_point = (
        ctx.backend.from_numpy(np.zeros((), dtype))
        if zero_point is None
        else _along(ctx, zero_point, x.shape)
    )
    if dtype in NARROW_FLOATS:
        steps = (step("Div", [0, 1], "float32"), step("Add", [3, 2], "float32"))
        ratio = run_chain(ctx, steps, [x, _along(ctx, scale, x.shape), zero_point], "quantize_float")
        return narrowed(ctx, ratio, dtype, bool(ctx.attrs.get("saturate", 1)))
    return _quantized(ctx, x, _along(ctx, scale, x.shape), zero_point, dtype)


def _quantized(
    ctx: GPUContext, x: DeviceArray, scale: DeviceArray, zero_point: DeviceArray, dtype: np.dtype
) -> DeviceArray:
    info = ml_dtypes.iinfo(dtype)
    bounds = [ctx.backend.from_numpy(np.array(v, np.float32)) for v in (info.min, info.max)]
    steps = (
        step("Div", [0, 1], "float32"),  # 5
        step("Round", [5], "float32"),
        step("Cast", [2], "float32"),
        step("Add", [6, 7], "float32"),
        step("Clip", [8, 3, 4], "float32", {"has_min": True, "has_max": True}),
        step("Cast", [9], dtype.name),
    )
    return run_chain(ctx, steps, [x, scale, zero_point, *bounds], "quantize_linear")


def _check_dequantize(node: Node, opset: int) -> str | None:
    code = node.attrs.get("output_dtype", 0)
    if code and from_onnx(int(code)) not in FLOATS:
        held = ", ".join(np.dtype(t).name for t in FLOATS)
        return f"output_dtype {from_onnx(int(code))}: the GPU dequantizes to {held}"
    return None


@GPU_KERNELS.register(
    "DequantizeLinear", since=10, check=_check_dequantize, dtypes=(*QUANTIZED, np.int32, *NARROW_FLOATS)
)
def dequantize(
    ctx: GPUContext, x: DeviceArray, scale: DeviceArray, zero_point: DeviceArray | None = None
) -> DeviceArray:
    """``(x - zero_point) * scale``, the difference taken in the integers (in float32 for the
    8- and 4-bit floats), of type ``output_dtype`` where given, else the scale's."""
    code = ctx.attrs.get("output_dtype", 0)
    zero_point = (
        ctx.backend.from_numpy(np.zeros((), x.dtype))
        if zero_point is None
        else _along(ctx, zero_point, x.shape)
    )
    steps = (
        step("Sub", [0, 2], "float32" if x.elem == f32 else "int32"),  # 3
        step("Cast", [3], "float32"),
        step("Mul", [4, 1], (from_onnx(int(code)) if code else scale.dtype).name),
    )
    return run_chain(ctx, steps, [x, _along(ctx, scale, x.shape), zero_point], "dequantize_linear")


@GPU_KERNELS.register("DynamicQuantizeLinear", since=11, dtypes=FLOATS)
def dynamic_quantize(ctx: GPUContext, x: DeviceArray) -> tuple[DeviceArray, DeviceArray, DeviceArray]:
    """uint8 ``x`` over the range ``[min(0, x), max(0, x)]``, with the scale and zero point it took."""
    low, high = (reduce(ctx, kind, x.view((x.size,)), None).view(()) for kind in ("Min", "Max"))
    zero, levels, one = (ctx.backend.from_numpy(np.array(v, np.float32)) for v in (0, 255, 1))
    steps = (
        step("Min", [0, 2], "float32"),  # 5: low, with 0
        step("Max", [1, 2], "float32"),  # 6: high, with 0
        step("Sub", [6, 5], "float32"),
        step("Div", [7, 3], "float32"),
        step("Greater", [6, 5], "bool"),
        step("Where", [9, 8, 4], "float32"),  # 10: the scale, 1 for an empty range
    )
    scale = run_chain(ctx, steps, [low, high, zero, levels, one], "dynamic_quantize_scale")
    steps = (
        step("Min", [0, 2], "float32"),  # 4: low, with 0
        step("Neg", [4], "float32"),
        step("Div", [5, 1], "float32"),
        step("Round", [6], "float32"),
        step("Clip", [7, 2, 3], "float32", {"has_min": True, "has_max": True}),
        step("Cast", [8], "uint8"),
    )
    zero_point = run_chain(ctx, steps, [low, scale, zero, levels], "dynamic_quantize_zero_point")
    return _quantized(ctx, x, scale, zero_point, np.dtype(np.uint8)), scale, zero_point


def _shifted(ctx: GPUContext, x: DeviceArray, zero_point: DeviceArray | None, per_row: bool) -> DeviceArray:
    """``x - zero_point`` in int32; ``a``'s 1-D zero point is per row, ``b``'s per column."""
    if zero_point is None:
        return run_chain(ctx, (step("Cast", [0], "int32"),), [x], "to_int32")
    if per_row and len(zero_point.shape) == 1 and zero_point.size > 1:
        zero_point = zero_point.view((zero_point.size, 1))
    return run_chain(ctx, (step("Sub", [0, 1], "int32"),), [x, zero_point], "shifted")


@GPU_KERNELS.register("MatMulInteger", since=10, dtypes=QUANTIZED[:2])
def matmul_integer(
    ctx: GPUContext,
    a: DeviceArray,
    b: DeviceArray,
    a_zero_point: DeviceArray | None = None,
    b_zero_point: DeviceArray | None = None,
) -> DeviceArray:
    """``(a - a_zero_point) @ (b - b_zero_point)`` in int32, exact for 8-bit operands."""
    return matmul(ctx, _shifted(ctx, a, a_zero_point, True), _shifted(ctx, b, b_zero_point, False))


@GPU_KERNELS.register("QLinearMatMul", since=10, dtypes=QUANTIZED[:2])
def qlinear_matmul(
    ctx: GPUContext,
    a: DeviceArray,
    a_scale: DeviceArray,
    a_zero_point: DeviceArray,
    b: DeviceArray,
    b_scale: DeviceArray,
    b_zero_point: DeviceArray,
    y_scale: DeviceArray,
    y_zero_point: DeviceArray,
) -> DeviceArray:
    """The int32 product requantized: ``round(product * (a_scale * b_scale / y_scale)) + y_zero_point``,
    saturated to ``y``'s type, the multiplier in float32."""
    product = matmul_integer(ctx, a, b, a_zero_point, b_zero_point)
    if len(a_scale.shape) == 1 and a_scale.size > 1:
        a_scale = a_scale.view((a_scale.size, 1))
    return requantized(ctx, product, a_scale, b_scale, y_scale, y_zero_point, "qlinear_matmul")


def requantized(
    ctx: GPUContext,
    total: DeviceArray,
    a_scale: DeviceArray,
    b_scale: DeviceArray,
    y_scale: DeviceArray,
    y_zero_point: DeviceArray,
    name: str,
) -> DeviceArray:
    """int32 ``total`` as ``round(total * (a_scale * b_scale / y_scale)) + y_zero_point`` saturated to
    ``y``'s type, the multiplier in float32: one generated chain."""
    info = ml_dtypes.iinfo(y_zero_point.dtype)
    bounds = [ctx.backend.from_numpy(np.array(v, np.float32)) for v in (info.min, info.max)]
    steps = (
        step("Mul", [1, 2], "float32"),  # 7
        step("Div", [7, 3], "float32"),  # 8: the multiplier
        step("Cast", [0], "float32"),
        step("Mul", [9, 8], "float32"),
        step("Round", [10], "float32"),
        step("Cast", [4], "float32"),
        step("Add", [11, 12], "float32"),
        step("Clip", [13, 5, 6], "float32", {"has_min": True, "has_max": True}),
        step("Cast", [14], y_zero_point.dtype.name),
    )
    inputs = [total, a_scale, b_scale, y_scale, y_zero_point, *bounds]
    return run_chain(ctx, steps, inputs, name)
