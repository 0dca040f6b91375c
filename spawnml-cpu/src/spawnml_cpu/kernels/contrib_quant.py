"""CPU kernels of onnxruntime's quantized products and transformer operators: the quantized forms
``quantize_dynamic`` gives Attention (QAttention, over a quantized input and quantized packed
weights) and EmbedLayerNormalization (QEmbedLayerNormalization, over quantized tables), and the
fused dynamic products its graph optimizer saves (DynamicQuantizeMatMul, MatMulIntegerToFloat).

As onnxruntime computes them: a product is exact in integers, then times ``a_scale *
b_scale`` (per column where the weights are per channel) in float32, plus the bias;
QAttention's heads are then Attention's; QEmbedLayerNormalization dequantizes each gathered
value (``(q - zero_point) * scale``) and normalizes as EmbedLayerNormalization does.
"""

from __future__ import annotations

import numpy as np
from spawnml.backend import KernelContext
from spawnml.ir import Node
from spawnml.ops.defs.contrib import MS
from spawnml.ops.shapes import normalize_axis

from .contrib import attend, embed_normalized, gathered, mask_index, position_ids, unpack_bits
from .integer_product import exact_product
from .narrow import NARROW_FLOATS
from .nn_common import widen
from .quant import dequantized, dynamic_quantize
from .table import KERNELS

Array = np.ndarray
FLOAT32 = np.dtype(np.float32)
#: QAttention's input of the key/value cache.
PAST = 8


def _check_qattention(node: Node, opset: int) -> str | None:
    if node.attrs.get("do_rotary", 0) or node.attrs.get("past_present_share_buffer", 0):
        return "rotary embedding and a shared past/present buffer are not implemented"
    return None if node.attrs.get("num_heads", 0) >= 1 else "num_heads must be at least 1"


@KERNELS.register("QAttention", domain=MS, check=_check_qattention)
def _qattention(
    ctx: KernelContext,
    x: Array,
    weights: Array,
    bias: Array,
    input_scale: Array,
    weight_scale: Array,
    mask: Array | None = None,
    input_zero_point: Array | None = None,
    weight_zero_point: Array | None = None,
    past: Array | None = None,
) -> tuple[Array, Array | None]:
    weight_zero = None if weight_zero_point is None else weight_zero_point.reshape(-1)
    accumulated = exact_product(x, weights, input_zero_point, weight_zero)
    projected = _scaled_product(accumulated, input_scale, weight_scale, bias)
    return attend(ctx, projected, FLOAT32, mask, past, None)


def _scaled_product(accumulated: Array, a_scale: Array, b_scale: Array, bias: Array | None) -> Array:
    """Exact integer sums times ``a_scale * b_scale`` (per column where ``b_scale`` is) in
    float32, plus the bias: onnxruntime's output step of a quantized product."""
    scale = np.float32(a_scale.reshape(-1)[0]) * b_scale.astype(FLOAT32).reshape(-1)
    y = accumulated.astype(FLOAT32) * scale
    return y if bias is None else y + bias.astype(FLOAT32)


@KERNELS.register("DynamicQuantizeMatMul", domain=MS)
def _dynamic_quantize_matmul(
    ctx: KernelContext,
    a: Array,
    b: Array,
    b_scale: Array,
    b_zero_point: Array | None = None,
    bias: Array | None = None,
) -> Array:
    """``A`` quantized dynamically (DynamicQuantizeLinear's rules, all of it at once) times the
    quantized ``B``."""
    quantized, a_scale, a_zero_point = dynamic_quantize(a)
    zero = None if b_zero_point is None else b_zero_point.reshape(-1)
    return _scaled_product(exact_product(quantized, b, a_zero_point, zero), a_scale, b_scale, bias)


@KERNELS.register("MatMulIntegerToFloat", domain=MS)
def _matmul_integer_to_float(
    ctx: KernelContext,
    a: Array,
    b: Array,
    a_scale: Array,
    b_scale: Array,
    a_zero_point: Array | None = None,
    b_zero_point: Array | None = None,
    bias: Array | None = None,
) -> Array:
    a_zero = None if a_zero_point is None else a_zero_point.reshape(())
    b_zero = None if b_zero_point is None else b_zero_point.reshape(-1)
    return _scaled_product(exact_product(a, b, a_zero, b_zero), a_scale, b_scale, bias)


@KERNELS.register("QEmbedLayerNormalization", domain=MS)
def _qembed_layer_norm(
    ctx: KernelContext,
    input_ids: Array,
    segment_ids: Array | None,
    word_embedding: Array,
    position_embedding: Array,
    segment_embedding: Array | None,
    gamma: Array,
    beta: Array,
    mask: Array | None,
    word_scale: Array,
    position_scale: Array,
    segment_scale: Array | None,
    gamma_scale: Array,
    beta_scale: Array,
    word_zero_point: Array,
    position_zero_point: Array,
    segment_zero_point: Array | None,
    gamma_zero_point: Array,
    beta_zero_point: Array,
) -> tuple[Array, Array]:
    positions = position_ids(None, input_ids.shape)
    embeddings = [
        dequantized(gathered(word_embedding, input_ids, "input_ids"), word_scale, word_zero_point),
        dequantized(
            gathered(position_embedding, positions, "position ids"), position_scale, position_zero_point
        ),
    ]
    if segment_ids is not None and segment_embedding is not None:
        if segment_scale is None or segment_zero_point is None:
            raise ValueError("QEmbedLayerNormalization: a segment embedding needs its scale and zero point")
        rows = gathered(segment_embedding, segment_ids, "segment_ids")
        embeddings.append(dequantized(rows, segment_scale, segment_zero_point))
    y, _ = embed_normalized(
        embeddings,
        dequantized(gamma, gamma_scale, gamma_zero_point),
        dequantized(beta, beta_scale, beta_zero_point),
        ctx.attrs["epsilon"],
    )
    return y, mask_index(mask, len(input_ids))


# GatherBlockQuantized ------------------------------------------------------------------------

GATHER_BITS = (2, 4, 8)


def _check_gather_block_quantized(node: Node, opset: int) -> str | None:
    bits, block = node.attrs.get("bits", 4), node.attrs.get("block_size", 128)
    if bits not in GATHER_BITS:
        return f"bits={bits} is not one of {list(GATHER_BITS)}"
    if block and (block < 16 or block & (block - 1)):
        return f"block_size={block} is not a power of two of at least 16"
    return None


def _per_value(params: Array, indices: Array, axes: tuple[int, int], block: int, size: int) -> Array:
    """Per-block scales or zero points of the gathered values: picked by the indices along the
    gather axis (by their blocks where it is the quantize axis), repeated over each block along
    the quantize axis; an axis of one broadcasts."""
    gather_axis, quantize_axis = axes
    step = block or size
    if gather_axis == quantize_axis:
        return (
            params if params.shape[gather_axis] == 1 else np.take(params, indices // step, axis=gather_axis)
        )
    if params.shape[gather_axis] > 1:
        params = np.take(params, indices, axis=gather_axis)
    axis = quantize_axis + (indices.ndim - 1 if quantize_axis > gather_axis else 0)
    if params.shape[axis] == 1:
        return params
    return np.repeat(params, step, axis=axis).take(np.arange(size), axis=axis)


@KERNELS.register("GatherBlockQuantized", domain=MS, check=_check_gather_block_quantized)
def _gather_block_quantized(
    ctx: KernelContext, data: Array, indices: Array, scales: Array, zero_points: Array | None = None
) -> Array:
    """Gather of block-quantized ``data``, dequantized as ``(q - zero_point) * scale`` with one
    scale and zero point per ``block_size`` values of ``quantize_axis``: uint8 data holds
    ``8 / bits`` values a byte along its last axis (lowest bits first), and zero points default to
    0 for int4 and uint4 and ``2 ** (bits - 1)`` for uint8; FP8 and FP4 data are only scaled.
    Only the gathered values are unpacked and dequantized."""
    attrs = ctx.attrs
    bits, block = attrs["bits"], attrs["block_size"]
    packed = data.dtype == np.uint8 and bits < 8
    axes = (
        normalize_axis(attrs["gather_axis"], data.ndim),
        normalize_axis(attrs["quantize_axis"], data.ndim),
    )
    size = data.shape[axes[1]] * (8 // bits if packed and axes[1] == data.ndim - 1 else 1)
    picked = np.take(data, indices, axis=axes[0])
    values = (unpack_bits(picked, bits) if packed else picked).astype(np.float32)
    if data.dtype.name not in NARROW_FLOATS:
        if zero_points is None:
            values -= np.float32(1 << (bits - 1) if data.dtype == np.uint8 else 0)
        else:
            zeros = unpack_bits(zero_points, bits) if packed else zero_points
            zeros = zeros.take(np.arange(scales.shape[axes[1]]), axis=axes[1]).astype(np.float32)
            values -= _per_value(zeros, indices, axes, block, size)
    return (values * _per_value(widen(scales), indices, axes, block, size)).astype(scales.dtype)
