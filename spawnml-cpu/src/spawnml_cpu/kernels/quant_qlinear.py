"""onnxruntime's QOperator contrib kernels (com.microsoft QLinear*, QGemm), computed as its CPU
provider computes them so that the integers agree: the float32 operations it runs, in its order,
rounded half to even and saturated at the end.

- Unary operators and the rescaling of QLinearConcat's and QLinearWhere's inputs go through a
  256-entry table: every value of the 8-bit type dequantized (``scale * (q - zero_point)``),
  mapped, and quantized again.
- QLinearAdd rescales each operand by the ratio of its scale to the output's, in fused
  multiply-adds (onnxruntime's x86 AVX2 kernel); QLinearMul multiplies the shifted integers'
  product by one float32 scale.
- Integer sums (QGemm, QLinearAveragePool, QLinearGlobalAveragePool) are exact; their
  requantization multiplies the float32 sum by float32 scales.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from spawnml.backend import KernelContext
from spawnml.dtypes import iinfo
from spawnml.ir import Node
from spawnml.ops.defs.contrib import MS
from spawnml.ops.shapes import normalize_axis

from .attention import sigmoid
from .nn_common import Windows, matmul
from .quant import dequantized, saturate
from .table import KERNELS

Array = np.ndarray
FLOAT32 = np.dtype(np.float32)


def _scalar(value: Array) -> np.float32:
    return np.float32(value.reshape(-1)[0])


def _zero_point(zero_point: Array | None, dtype: np.dtype) -> Array:
    """A zero point, or 0 in the quantized type where it is absent."""
    return np.zeros((), dtype) if zero_point is None else zero_point.reshape(())


def quantize(values: Array, scale: np.float32, zero_point: Array) -> Array:
    """float32 ``values / scale`` rounded half to even, plus the zero point, saturated into its type."""
    ratio = values.astype(FLOAT32, copy=False) / np.float32(scale)
    return saturate(np.rint(ratio) + zero_point.astype(FLOAT32), zero_point.dtype)


def requantize(accumulated: Array, scale: Array | np.float32, zero_point: Array) -> Array:
    """Integer sums times a float32 scale, rounded half to even, plus the zero point, saturated."""
    product = accumulated.astype(FLOAT32) * np.asarray(scale, FLOAT32)
    return saturate(np.rint(product) + zero_point.astype(FLOAT32), zero_point.dtype)


def _every_value(dtype: np.dtype) -> Array:
    """Every value of an 8-bit integer type, from its lowest."""
    info = iinfo(dtype)
    return np.arange(info.min, info.max + 1).astype(dtype)


def _lookup(
    x: Array,
    x_scale: Array,
    x_zero_point: Array | None,
    y_scale: Array,
    y_zero_point: Array | None,
    fn: Callable[[Array], Array],
) -> Array:
    """``fn`` of the dequantized ``x``, quantized to ``y``'s parameters, through a table of every
    value of ``x``'s type."""
    x_zero = _zero_point(x_zero_point, x.dtype)
    values = _every_value(x.dtype)
    table = quantize(
        fn(dequantized(values, x_scale, x_zero)),
        _scalar(y_scale),
        _zero_point(y_zero_point, x.dtype),
    )
    return table[x.astype(np.int32) - int(values[0])]


@KERNELS.register("QLinearSigmoid", domain=MS)
def _qlinear_sigmoid(
    ctx: KernelContext,
    x: Array,
    x_scale: Array,
    x_zero_point: Array | None,
    y_scale: Array,
    y_zero_point: Array | None = None,
) -> Array:
    return _lookup(x, x_scale, x_zero_point, y_scale, y_zero_point, sigmoid)


@KERNELS.register("QLinearLeakyRelu", domain=MS)
def _qlinear_leaky_relu(
    ctx: KernelContext,
    x: Array,
    x_scale: Array,
    x_zero_point: Array | None,
    y_scale: Array,
    y_zero_point: Array | None = None,
) -> Array:
    alpha = np.float32(ctx.attrs["alpha"])
    return _lookup(x, x_scale, x_zero_point, y_scale, y_zero_point, lambda v: np.where(v >= 0, v, v * alpha))


def _fused_multiply_add(x: Array, y: np.float32, z: Array | np.float32) -> Array:
    """float32 ``x * y + z`` rounded once, as a fused multiply-add: the product of two float32
    is exact in float64."""
    return (x.astype(np.float64) * np.float64(y) + np.asarray(z, np.float64)).astype(FLOAT32)


@KERNELS.register("QLinearAdd", domain=MS)
def _qlinear_add(
    ctx: KernelContext,
    a: Array,
    a_scale: Array,
    a_zero_point: Array | None,
    b: Array,
    b_scale: Array,
    b_zero_point: Array | None,
    c_scale: Array,
    c_zero_point: Array | None = None,
) -> Array:
    """onnxruntime's (x86 AVX2) QLinearAdd: each operand times the ratio of its scale to the
    output's, added by fused multiply-adds to ``c_zero - (a_ratio * a_zero + b_ratio * b_zero)``
    (B's term first, then A's; a one-element operand's term folded into that constant first)."""
    c_zero = _zero_point(c_zero_point, a.dtype)
    scale_c = _scalar(c_scale)
    terms = [
        (x.astype(FLOAT32), _scalar(scale) / scale_c, np.float32(_zero_point(zero_point, x.dtype)))
        for x, scale, zero_point in ((a, a_scale, a_zero_point), (b, b_scale, b_zero_point))
    ]
    (value_a, ratio_a, zero_a), (value_b, ratio_b, zero_b) = terms
    fixed = np.float32(c_zero) - (ratio_a * zero_a + ratio_b * zero_b)
    if value_a.size == 1 and value_b.size > 1:  # onnxruntime swaps the operands to make B the scalar
        (value_a, ratio_a, _), (value_b, ratio_b, _) = terms[1], terms[0]
    if value_b.size == 1:
        values = _fused_multiply_add(value_a, ratio_a, fixed + value_b.reshape(()) * ratio_b)
        values = values.reshape(np.broadcast_shapes(a.shape, b.shape))
    else:
        values = _fused_multiply_add(value_a, ratio_a, _fused_multiply_add(value_b, ratio_b, fixed))
    return saturate(np.rint(values), c_zero.dtype)


@KERNELS.register("QLinearMul", domain=MS)
def _qlinear_mul(
    ctx: KernelContext,
    a: Array,
    a_scale: Array,
    a_zero_point: Array | None,
    b: Array,
    b_scale: Array,
    b_zero_point: Array | None,
    c_scale: Array,
    c_zero_point: Array | None = None,
) -> Array:
    """The product of the zero-point-shifted operands times ``a_scale * b_scale / c_scale``, plus
    the output's zero point, in float32, then rounded."""
    c_zero = _zero_point(c_zero_point, a.dtype)
    shifted_a = a.astype(np.int32) - _zero_point(a_zero_point, a.dtype).astype(np.int32)
    shifted_b = b.astype(np.int32) - _zero_point(b_zero_point, b.dtype).astype(np.int32)
    multiplier = _scalar(a_scale) * _scalar(b_scale) / _scalar(c_scale)
    values = (shifted_a * shifted_b).astype(FLOAT32) * multiplier + np.float32(c_zero)
    return saturate(np.rint(values), c_zero.dtype)


def _rescaled(x: Array, scale: Array, zero_point: Array | None, y_scale: Array, y_zero_point: Array) -> Array:
    """``x`` at the output's scale and zero point: itself where they are its own, else through a
    table, as onnxruntime rescales the inputs of QLinearConcat and QLinearWhere."""
    if _scalar(scale) == _scalar(y_scale) and _zero_point(zero_point, x.dtype) == y_zero_point.reshape(()):
        return x
    return _lookup(x, scale, zero_point, y_scale, y_zero_point, lambda values: values)


@KERNELS.register("QLinearConcat", domain=MS)
def _qlinear_concat(ctx: KernelContext, y_scale: Array, y_zero_point: Array, *parts: Array) -> Array:
    """The (tensor, scale, zero point) inputs rescaled to the output's parameters and joined."""
    triples = [parts[index : index + 3] for index in range(0, len(parts), 3)]
    rescaled = [_rescaled(x, scale, zero_point, y_scale, y_zero_point) for x, scale, zero_point in triples]
    return np.concatenate(rescaled, axis=ctx.attrs["axis"])


@KERNELS.register("QLinearWhere", domain=MS)
def _qlinear_where(
    ctx: KernelContext,
    condition: Array,
    x: Array,
    x_scale: Array,
    x_zero_point: Array,
    y: Array,
    y_scale: Array,
    y_zero_point: Array,
    z_scale: Array,
    z_zero_point: Array,
) -> Array:
    """``X`` where the condition holds, else ``Y``, each rescaled to the output's parameters."""
    chosen = _rescaled(x, x_scale, x_zero_point, z_scale, z_zero_point)
    other = _rescaled(y, y_scale, y_zero_point, z_scale, z_zero_point)
    return np.where(condition, chosen, other)


def _channels_first(node: Node, opset: int) -> str | None:
    return "channels_last=1 is not supported" if node.attrs.get("channels_last", 0) else None


@KERNELS.register("QLinearAveragePool", domain=MS, check=_channels_first)
def _qlinear_average_pool(
    ctx: KernelContext,
    x: Array,
    x_scale: Array,
    x_zero_point: Array | None,
    y_scale: Array,
    y_zero_point: Array | None = None,
) -> Array:
    """Each window's exact integer sum less its zero points, times ``x_scale``, over the window's
    size and ``y_scale`` in float32, plus the output's zero point, rounded. As in onnxruntime the
    size is the kernel's with ``count_include_pad`` (also where ``ceil_mode`` runs a window past
    the pads), else the taps on the input."""
    zero = _zero_point(y_zero_point, x.dtype)
    shifted = x.astype(np.int32) - _zero_point(x_zero_point, x.dtype).astype(np.int32)
    windows = Windows.of(ctx.attrs, x.shape[2:], ctx.attrs["kernel_shape"])
    sums = sum(windows.each_tap(shifted), np.zeros((), np.int32))  # pads add 0
    if ctx.attrs["count_include_pad"]:
        counts = np.float32(math.prod(windows.kernel))
    else:
        counts = sum(windows.each_tap(np.ones((1, 1, *x.shape[2:]), FLOAT32)), np.zeros((), FLOAT32))[0, 0]
    values = sums.astype(FLOAT32) * _scalar(x_scale) / counts / _scalar(y_scale) + np.float32(zero)
    return saturate(np.rint(values), zero.dtype)


@KERNELS.register("QLinearGlobalAveragePool", domain=MS, check=_channels_first)
def _qlinear_global_average_pool(
    ctx: KernelContext,
    x: Array,
    x_scale: Array,
    x_zero_point: Array | None,
    y_scale: Array,
    y_zero_point: Array | None = None,
) -> Array:
    """The exact integer sum of each plane less its zero points, times ``x_scale / (y_scale * size)``."""
    size = math.prod(x.shape[2:])
    sums = x.reshape(*x.shape[:2], size).astype(np.int64).sum(axis=-1)
    sums -= int(_zero_point(x_zero_point, x.dtype)) * size
    scale = _scalar(x_scale) / (_scalar(y_scale) * np.float32(size))
    y = requantize(sums, scale, _zero_point(y_zero_point, x.dtype))
    return y.reshape(*x.shape[:2], *(1,) * (x.ndim - 2))


@KERNELS.register("QGemm", domain=MS)
def _qgemm(
    ctx: KernelContext,
    a: Array,
    a_scale: Array,
    a_zero_point: Array,
    b: Array,
    b_scale: Array,
    b_zero_point: Array,
    c: Array | None = None,
    y_scale: Array | None = None,
    y_zero_point: Array | None = None,
) -> Array:
    """``alpha * (A - a_zero) @ (B - b_zero) + C`` (C int32 at scale ``a_scale * b_scale``):
    requantized where ``y_zero_point`` is given, else float32."""
    attrs = ctx.attrs
    a = a.T if attrs["transA"] else a
    b, b_zero = (b.T, b_zero_point) if attrs["transB"] else (b, b_zero_point)
    shifted_a = a.astype(np.float64) - np.float64(a_zero_point.reshape(-1)[0])
    accumulated = matmul(shifted_a, b.astype(np.float64) - b_zero.astype(np.float64).reshape(-1))
    if c is not None:
        accumulated = accumulated + c.astype(np.float64)
    scales = np.float32(attrs["alpha"]) * _scalar(a_scale) * b_scale.astype(FLOAT32).reshape(-1)
    if y_scale is not None:
        scales = scales / _scalar(y_scale)
    if y_zero_point is not None:
        return requantize(accumulated, scales, y_zero_point.reshape(()))
    return accumulated.astype(FLOAT32) * scales


@KERNELS.register("QLinearSoftmax", domain=MS)
def _qlinear_softmax(
    ctx: KernelContext,
    x: Array,
    x_scale: Array,
    x_zero_point: Array | None,
    y_scale: Array,
    y_zero_point: Array | None = None,
) -> Array:
    """onnxruntime's table softmax: ``exp`` of each value's distance below the row's maximum (in
    steps of ``x_scale``, shifted up so the sum keeps its precision), summed in float32 in order,
    and each share times ``floor(1 / y_scale)`` rounded; before ``opset`` 13 the rows are the
    flattened axes from ``axis`` on."""
    legacy = ctx.attrs["opset"] < 13
    axis = normalize_axis(ctx.attrs["axis"] if "axis" in ctx.node.attrs or not legacy else 1, x.ndim)
    moved = x.reshape(*x.shape[:axis], -1) if legacy else np.moveaxis(x, axis, -1)
    width = moved.shape[-1]
    distance = moved.max(axis=-1, keepdims=True).astype(np.int32) - moved.astype(np.int32)
    table = _exp_table(_scalar(x_scale), width)
    exps = table[255 - distance]
    # onnxruntime adds the row from its first element on: a running sum, not numpy's pairwise one
    total = np.cumsum(exps, axis=-1, dtype=FLOAT32)[..., -1:]
    multiplier = np.float32(math.floor(np.float32(1) / _scalar(y_scale)))
    shares = np.rint(exps * multiplier / total).astype(np.int64)
    y = _softmax_output(shares, _zero_point(y_zero_point, x.dtype))
    return y.reshape(x.shape) if legacy else np.moveaxis(y, -1, axis)


def _exp_table(x_scale: np.float32, width: int) -> Array:
    """``exp((i - 255 + shift) * x_scale)`` for the 256 distances ``i``, in float32; ``shift``
    keeps the row's sum of up to ``width`` terms below float32's range, as onnxruntime's does."""
    shift = max(0.0, math.log(float(np.finfo(FLOAT32).max) / width) - 5) / float(x_scale)
    steps = np.arange(256, dtype=np.float64)
    return np.exp((steps - 255 + shift) * float(x_scale)).astype(FLOAT32)


def _softmax_output(shares: Array, zero_point: Array) -> Array:
    """Shares plus the zero point, saturated into the output type."""
    return saturate(shares + zero_point.astype(np.int64), zero_point.dtype)
