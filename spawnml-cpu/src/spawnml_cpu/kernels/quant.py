"""Quantization: (de)quantize per tensor, axis or block (also as onnxruntime's com.microsoft
QuantizeLinear and DequantizeLinear), and exact integer products.

Integer products are exact (:mod:`.integer_product`), so the int32 results are too.
"""

from __future__ import annotations

import functools
import math
from types import ModuleType

import numpy as np
from spawnml.backend import KernelContext
from spawnml.dtypes import NARROW_INTEGER_NAMES, finfo, from_onnx, iinfo
from spawnml.ir import Node
from spawnml.ops.defs.contrib import MS
from spawnml.ops.shapes import normalize_axis

from .constant_forms import constant_form
from .conv import convolve
from .integer_product import EIGHT_BIT, FLOAT32_EXACT, exact_product, integer_matmul, shifted
from .narrow import NARROW_FLOATS, to_narrow_float, to_narrow_integer
from .nn_common import compute_dtype, per_channel
from .table import KERNELS

_SMALL_INTEGERS = NARROW_INTEGER_NAMES
FLOAT32 = np.dtype(np.float32)


def is_integer(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.integer) or dtype.name in _SMALL_INTEGERS


def saturate(values: np.ndarray, dtype: np.dtype, clip: bool = True) -> np.ndarray:
    """Real values rounded (half to even) and clipped into ``dtype``'s range, or cast to an 8- or
    4-bit float as Cast does, saturating to its finite range when ``clip``."""
    if is_integer(dtype):
        info = iinfo(dtype)
        values = np.clip(np.rint(values), info.min, info.max)
        return to_narrow_integer(values, dtype) if dtype.name in _SMALL_INTEGERS else values.astype(dtype)
    if dtype.name in NARROW_FLOATS:
        return to_narrow_float(values, dtype, clip)
    if clip:
        limit = float(finfo(dtype).max)
        values = np.clip(values, -limit, limit)
    return values.astype(dtype)


def along(param: np.ndarray, shape: tuple[int, ...], axis: int, block_size: int = 0) -> np.ndarray:
    """A scale or zero point shaped to broadcast against ``shape``: per tensor, axis or block."""
    if param.size == 1 and not block_size:
        return param.reshape(())
    axis = normalize_axis(axis, len(shape))
    if block_size:
        blocks = np.repeat(param, block_size, axis=axis)
        return blocks[(slice(None),) * axis + (slice(0, shape[axis]),)]
    return param.reshape(-1, *(1,) * (len(shape) - axis - 1))


def dequantized(values: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None) -> np.ndarray:
    """``(values - zero_point) * scale`` with one float32 scale, as onnxruntime's contrib kernels
    dequantize: the integer difference is exact, the product rounded once."""
    return shifted(values, zero_point).astype(np.float32) * np.float32(scale.reshape(-1)[0])


def _quantized_type(ctx: KernelContext, zero_point: np.ndarray | None) -> np.dtype:
    if zero_point is not None:
        return zero_point.dtype
    code = ctx.attrs.get("output_dtype", 0)
    return from_onnx(code) if code else np.dtype(np.uint8)


def _float32_precision(node: Node, opset: int) -> str | None:
    precision = node.attrs.get("precision", 0)
    return None if precision in (0, 1) else f"precision {precision} (other than float32) is not supported"


@KERNELS.register("QuantizeLinear", domain=MS)
@KERNELS.register("QuantizeLinear", since=10, check=_float32_precision)
def _quantize(
    ctx: KernelContext, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None
) -> np.ndarray:
    dtype = _quantized_type(ctx, zero_point)
    axis, block = ctx.attrs.get("axis", 1), ctx.attrs.get("block_size", 0)
    if _per_tensor_8_bit(x, scale, dtype, block):
        return _quantize_8_bit(x, scale, zero_point, dtype)
    work = compute_dtype(scale.dtype)
    ratio = x.astype(work) / along(scale, x.shape, axis, block).astype(work)
    if is_integer(dtype):
        ratio = np.rint(ratio)
    if zero_point is not None:
        ratio = ratio + along(zero_point, x.shape, axis, block).astype(work)
    return saturate(ratio, dtype, bool(ctx.attrs.get("saturate", 1)))


@KERNELS.register("DequantizeLinear", domain=MS)
@KERNELS.register("DequantizeLinear", since=10)
def _dequantize(
    ctx: KernelContext, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None
) -> np.ndarray:
    code = ctx.attrs.get("output_dtype", 0)
    dtype = from_onnx(code) if code else scale.dtype
    axis, block = ctx.attrs.get("axis", 1), ctx.attrs.get("block_size", 0)
    if _per_tensor_8_bit(x, scale, x.dtype, block) and dtype == FLOAT32:
        return _dequantized_table(x.dtype, scale, zero_point).take(x.view(np.uint8))
    work = compute_dtype(scale.dtype)
    if zero_point is not None:
        zero_point = along(zero_point, x.shape, axis, block)
    values = shifted(x, zero_point).astype(work)
    return (values * along(scale, x.shape, axis, block).astype(work)).astype(dtype)


def _per_tensor_8_bit(x: np.ndarray, scale: np.ndarray, dtype: np.dtype, block: int) -> bool:
    """Whether (de)quantizing runs on the 8-bit paths: float32 values, one float32 scale, an
    8-bit integer type."""
    return (
        dtype in EIGHT_BIT
        and scale.size == 1
        and scale.dtype == FLOAT32
        and not block
        and x.dtype
        in (
            FLOAT32,
            *EIGHT_BIT,
        )
    )


def _quantize_8_bit(
    x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, dtype: np.dtype
) -> np.ndarray:
    """QuantizeLinear's float32 operations in one compiled pass."""
    info = np.iinfo(dtype)
    zero = np.full(1, 0 if zero_point is None else zero_point.reshape(-1)[0], np.float32)
    out = np.empty(x.shape, dtype)
    rows = np.ascontiguousarray(x).reshape(1, -1)
    scales = scale.reshape(1).astype(np.float32)
    _loops().quantize_rows(rows, scales, zero, np.float32(info.min), np.float32(info.max), out.reshape(1, -1))
    return out


def _dequantized_table(dtype: np.dtype, scale: np.ndarray, zero_point: np.ndarray | None) -> np.ndarray:
    """Every value of the 8-bit ``dtype`` dequantized (``(q - zero_point) * scale`` in float32),
    indexed by its bits as uint8: a lookup gives each element what computing it would."""
    values = np.arange(256, dtype=np.uint8).view(dtype).astype(FLOAT32)
    zero = FLOAT32.type(0 if zero_point is None else zero_point.reshape(-1)[0])
    return (values - zero) * FLOAT32.type(scale.reshape(-1)[0])


@functools.cache
def _loops() -> ModuleType:
    """The compiled loop, imported on first use (numba takes a while to import)."""
    from . import quant_loops

    return quant_loops


@KERNELS.register("DynamicQuantizeLinear", since=11)
def _dynamic_quantize(ctx: KernelContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return dynamic_quantize(x)


def dynamic_quantize(x: np.ndarray, axis: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``x`` as uint8 over its range widened to hold 0 (of each row of a 2-D ``x`` with ``axis=1``),
    with the scale and zero point, as onnxruntime computes them: ``scale = (max - min) / 255`` in
    float32 (1 where the range is empty), the zero point ``-min / scale`` and each value
    ``x / scale``, rounded half to even."""
    if axis not in (None, 1) or (axis == 1 and x.ndim != 2):
        raise ValueError(f"dynamic quantization over axis {axis} of a rank-{x.ndim} tensor is not supported")
    rows = np.ascontiguousarray(x, dtype=np.float32)
    rows = rows if axis == 1 else rows.reshape(1, rows.size)
    low, high = np.empty(len(rows), np.float32), np.empty(len(rows), np.float32)
    _loops().row_ranges(rows, low, high)
    scale = np.where(high > low, (high - low) / np.float32(255), np.float32(1)).astype(np.float32)
    zero_point = saturate(-low / scale, np.dtype(np.uint8))
    y = np.empty(rows.shape, np.uint8)
    _loops().quantize_rows(rows, scale, zero_point.astype(np.float32), np.float32(0), np.float32(255), y)
    if axis == 1:
        return y, scale[:, None], zero_point[:, None]
    return y.reshape(x.shape), scale.reshape(()), zero_point.reshape(())


@KERNELS.register("MatMulInteger", since=10)
def _matmul_integer(
    ctx: KernelContext,
    a: np.ndarray,
    b: np.ndarray,
    a_zero_point: np.ndarray | None = None,
    b_zero_point: np.ndarray | None = None,
) -> np.ndarray:
    return integer_matmul(a, b, a_zero_point, b_zero_point).astype(np.int32)


def _integer_conv(
    attrs: dict,
    x: np.ndarray,
    w: np.ndarray,
    x_zero_point: np.ndarray | None,
    w_zero_point: np.ndarray | None,
) -> np.ndarray:
    """Exact convolution of zero-point-shifted ``x`` and ``w`` (per output channel): float32
    convolutions over as many input channels at a time as keep every sum within 2**24 (as
    :mod:`.integer_product` multiplies), added in float64; float64 where a group is too deep."""
    zeros = np.zeros((), np.int64) if w_zero_point is None else w_zero_point
    eight_bit = x.dtype in EIGHT_BIT and w.dtype in EIGHT_BIT
    if not eight_bit or (x_zero_point is not None and x_zero_point.size != 1):
        return convolve(attrs, shifted(x, x_zero_point), shifted(w, along(zeros, w.shape, 0)))
    x_zero = 0 if x_zero_point is None else int(x_zero_point.reshape(-1)[0])
    info = np.iinfo(x.dtype)
    x_bound = max(info.max - x_zero, x_zero - info.min)
    weights, w_bound = constant_form(w, ("conv float32", zeros.tobytes()), lambda: _shifted_weights(w, zeros))
    taps = math.prod(w.shape[2:])
    channels = max(1, FLOAT32_EXACT // max(1, x_bound * w_bound)) // taps
    values = x.astype(np.float32) - np.float32(x_zero)
    if channels >= w.shape[1]:
        return convolve(attrs, values, weights)
    if channels == 0 or attrs.get("group", 1) != 1:
        return convolve(attrs, values.astype(np.float64), weights.astype(np.float64))
    total = np.zeros((), np.float64)
    for start in range(0, w.shape[1], channels):
        part = slice(start, start + channels)
        total = total + convolve(attrs, values[:, part], weights[:, part])
    return total


def _shifted_weights(w: np.ndarray, zeros: np.ndarray) -> tuple[np.ndarray, int]:
    """``w`` less its zero points (per output channel) in float32, and the largest magnitude in it."""
    weights = w.astype(np.float32) - along(zeros, w.shape, 0).astype(np.float32)
    return weights, int(np.abs(weights).max(initial=0))


@KERNELS.register("ConvInteger", since=10)
def _conv_integer(
    ctx: KernelContext,
    x: np.ndarray,
    w: np.ndarray,
    x_zero_point: np.ndarray | None = None,
    w_zero_point: np.ndarray | None = None,
) -> np.ndarray:
    return _integer_conv(ctx.attrs, x, w, x_zero_point, w_zero_point).astype(np.int32)


def _requantize(
    accumulated: np.ndarray, scale: np.ndarray, y_scale: np.ndarray, y_zero_point: np.ndarray
) -> np.ndarray:
    """Integer accumulators scaled by ``scale / y_scale`` in float32, into ``y``'s type."""
    multiplier = scale.astype(np.float32) / y_scale.astype(np.float32)
    values = np.rint(accumulated.astype(np.float32) * multiplier)
    return saturate(values + y_zero_point.astype(np.float32), y_zero_point.dtype)


@KERNELS.register("QLinearMatMul", since=10)
def _qlinear_matmul(
    ctx: KernelContext,
    a: np.ndarray,
    a_scale: np.ndarray,
    a_zero_point: np.ndarray,
    b: np.ndarray,
    b_scale: np.ndarray,
    b_zero_point: np.ndarray,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray,
) -> np.ndarray:
    accumulated = exact_product(a, b, a_zero_point, b_zero_point)
    scale = a_scale.astype(np.float32) * b_scale.astype(np.float32)
    return _requantize(accumulated, scale, y_scale, y_zero_point)


@KERNELS.register("QLinearConv", since=10)
def _qlinear_conv(
    ctx: KernelContext,
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray,
    w: np.ndarray,
    w_scale: np.ndarray,
    w_zero_point: np.ndarray,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray,
    bias: np.ndarray | None = None,
) -> np.ndarray:
    accumulated = _integer_conv(ctx.attrs, x, w, x_zero_point, w_zero_point)
    if bias is not None:
        accumulated = accumulated + per_channel(bias.astype(np.float64), accumulated.ndim)
    scale = x_scale.astype(np.float32) * w_scale.astype(np.float32).reshape(-1)
    return _requantize(accumulated, per_channel(scale, accumulated.ndim), y_scale, y_zero_point)
