"""CPU kernels of onnxruntime's contrib operators, with its semantics: the com.microsoft
activations, GemmFastGelu, BiasAdd, BiasSoftmax, skip and simplified layer normalization,
EmbedLayerNormalization, Attention, RotaryEmbedding, FusedMatMul, MatMulNBits and FusedConv,
and the ai.onnx LayerNormalization (before opset 17) and SimplifiedLayerNormalization it adds.

16-bit floats are computed in float32. Normalization statistics come out in float32 (or
``stash_type``), and the normalized output takes the scale's type.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from spawnml.backend import KernelContext
from spawnml.dtypes import from_onnx
from spawnml.errors import InvalidArgumentError
from spawnml.ir import Node
from spawnml.ops.shapes import as_text, normalize_axis
from spawnml.plan_compiler import specialize

from .attention import merge_heads, sigmoid, softmax, split_heads
from .conv import convolve
from .elementwise import erf_gelu
from .nn_common import compute_dtype, matmul, widen
from .norm import layer_norm, layer_norm_direct, normalize_rows_loop
from .table import KERNELS

MS = "com.microsoft"
Array = np.ndarray
FLOAT32 = np.dtype(np.float32)
#: ONNX codes of the types statistics may be held in: float, double.
STASH_CODES = (1, 11)


def given(node: Node, index: int) -> bool:
    """Whether the node's optional input ``index`` is given."""
    return index < len(node.inputs) and bool(node.inputs[index])


# Activations ---------------------------------------------------------------------------------


def tanh_gelu(x: Array) -> Array:
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))


def _activation(fn: Callable[[Array], Array]) -> Callable[..., Array]:
    """A kernel applying ``fn`` to the sum of its inputs (a bias, where given) in the compute type."""

    def kernel(ctx: KernelContext, x: Array, *biases: Array | None) -> Array:
        total = widen(x)
        for bias in biases:
            if bias is not None:
                total = total + widen(bias)
        with np.errstate(over="ignore"):
            return fn(total).astype(x.dtype, copy=False)

    return kernel


KERNELS.register("Gelu", domain=MS)(_activation(erf_gelu))
KERNELS.register("BiasGelu", domain=MS)(_activation(erf_gelu))
_fast_gelu = _activation(tanh_gelu)
KERNELS.register("FastGelu", domain=MS)(_fast_gelu)
KERNELS.register("BiasAdd", domain=MS)(_activation(lambda total: total))


@KERNELS.register("GemmFastGelu", domain=MS)
def _gemm_fast_gelu(ctx: KernelContext, x: Array, weights: Array, bias: Array | None = None) -> Array:
    """FastGelu of ``x @ weights + bias``."""
    return _fast_gelu(ctx, matmul(widen(x), widen(weights)), bias).astype(x.dtype, copy=False)


@KERNELS.register("QuickGelu", domain=MS)
def _quick_gelu(ctx: KernelContext, x: Array) -> Array:
    work = widen(x)
    return (work * sigmoid(work * work.dtype.type(ctx.attrs["alpha"]))).astype(x.dtype, copy=False)


@KERNELS.register("BiasSoftmax", domain=MS)
def _bias_softmax(ctx: KernelContext, data: Array, bias: Array) -> Array:
    """Softmax of ``data + bias`` over the axes from ``axis`` on, as one row each; the bias
    broadcasts against the data (over inner or outer axes, as ``is_inner_broadcast`` says)."""
    try:
        fits = np.broadcast_shapes(data.shape, bias.shape) == data.shape
    except ValueError:
        fits = False
    if not fits:
        raise InvalidArgumentError(
            f"BiasSoftmax: a bias of shape {list(bias.shape)} does not broadcast to data {list(data.shape)}"
        )
    axis = normalize_axis(ctx.attrs["axis"], data.ndim)
    rows = (widen(data) + widen(bias)).reshape(*data.shape[:axis], -1)
    return softmax(rows).reshape(data.shape).astype(data.dtype, copy=False)


# Normalization -------------------------------------------------------------------------------


def _normalize(
    x: Array, axis: int, epsilon: float, stash: np.dtype, centered: bool
) -> tuple[Array, Array | None, Array]:
    """``x`` standardized over the axes from ``axis`` (only scaled to unit root mean square
    when not ``centered``), with its mean and inverse deviation in ``stash``. Computed in the
    wider of ``stash`` and the input's compute type; ``x`` is left as it was, and the result is
    a new array."""
    work = x.astype(np.result_type(compute_dtype(x.dtype), stash), copy=False)
    axes = tuple(range(normalize_axis(axis, x.ndim), x.ndim))
    mean = work.mean(axis=axes, keepdims=True) if centered else None
    deviation = work - mean if centered else work
    inv_std = 1 / np.sqrt(np.square(deviation).mean(axis=axes, keepdims=True) + work.dtype.type(epsilon))
    # the deviation is a temporary when centered: scale it in place
    normalized = np.multiply(deviation, inv_std, out=deviation if centered else None)
    return normalized, None if mean is None else mean.astype(stash), inv_std.astype(stash)


def _scaled(normalized: Array, scale: Array, bias: Array | None, dtype: np.dtype) -> Array:
    """``normalized * scale + bias`` in the compute type, rounded to ``dtype``; ``normalized``
    (a temporary of :func:`_normalize`) is overwritten."""
    y = normalized.astype(np.result_type(normalized, compute_dtype(scale.dtype)), copy=False)
    y *= widen(scale)
    if bias is not None:
        y += widen(bias)
    return y.astype(dtype, copy=False)


def _check_stash(node: Node, opset: int) -> str | None:
    code = node.attrs.get("stash_type", 1)
    return None if code in STASH_CODES else f"stash_type={code} is not float or double"


@KERNELS.register("LayerNormalization", until=17, check=_check_stash)
def _layer_norm_v1(
    ctx: KernelContext, x: Array, scale: Array, bias: Array | None = None
) -> tuple[Array, Array | None, Array]:
    """onnxruntime's LayerNormalization before opset 17: the output takes the scale's type (in
    float32 throughout, the operator is the standard one of opset 17)."""
    if x.dtype == scale.dtype == FLOAT32:
        return layer_norm(ctx, x, scale, bias)
    attrs = ctx.attrs
    normalized, mean, inv_std = _normalize(
        x, attrs["axis"], attrs["epsilon"], from_onnx(attrs["stash_type"]), True
    )
    return _scaled(normalized, scale, bias, scale.dtype), mean, inv_std


specialize(_layer_norm_v1, layer_norm_direct)


@KERNELS.register("SimplifiedLayerNormalization", check=_check_stash)
def _simplified_layer_norm(ctx: KernelContext, x: Array, scale: Array) -> tuple[Array, Array]:
    """Root-mean-square normalization; the output takes the scale's type."""
    attrs = ctx.attrs
    normalized, _, inv_std = _normalize(
        x, attrs["axis"], attrs["epsilon"], from_onnx(attrs["stash_type"]), False
    )
    return _scaled(normalized, scale, None, scale.dtype), inv_std


def _skip_normalize(
    ctx: KernelContext,
    x: Array,
    skip: Array,
    gamma: Array,
    beta: Array | None,
    bias: Array | None,
    centered: bool,
) -> tuple[Array, Array | None, Array, Array | None]:
    """Normalize ``input + skip + bias`` over the last axis; also give the statistics and the sum."""
    given = [a for a in (x, skip, gamma, beta, bias) if a is not None]
    if all(a.dtype == FLOAT32 for a in given) and skip.shape == x.shape and x.size:
        outputs = ctx.node.outputs
        wanted = len(outputs) > 3 and bool(outputs[3])
        return _skip_normalize_float32(ctx.attrs["epsilon"], x, skip, gamma, beta, bias, centered, wanted)
    total = widen(x) + widen(skip)
    if bias is not None:
        total += widen(bias)
    normalized, mean, inv_std = _normalize(total, -1, ctx.attrs["epsilon"], FLOAT32, centered)
    return _scaled(normalized, gamma, beta, x.dtype), mean, inv_std, total.astype(x.dtype, copy=False)


def _skip_normalize_float32(
    epsilon: float,
    x: Array,
    skip: Array,
    gamma: Array,
    beta: Array | None,
    bias: Array | None,
    centered: bool,
    sum_wanted: bool,
) -> tuple[Array, Array | None, Array, Array | None]:
    """:func:`_skip_normalize` of float32 arrays on the compiled row loop; the sum only where
    ``sum_wanted`` (else the loop keeps each row's in one row of scratch)."""
    hidden = x.shape[-1]
    rows = (np.ascontiguousarray(a).reshape(-1, hidden) for a in (x, skip))
    zeros = np.zeros(hidden, FLOAT32)
    out = np.empty_like(x)
    total = np.empty_like(x) if sum_wanted else np.empty(hidden, FLOAT32)
    mean, inv_std = (np.empty((*x.shape[:-1], 1), FLOAT32) for _ in range(2))
    normalize_rows_loop()(
        *rows,
        *(np.ascontiguousarray(a).reshape(hidden) for a in (gamma, zeros if beta is None else beta)),
        np.ascontiguousarray(zeros if bias is None else bias).reshape(hidden),
        np.float32(epsilon),
        centered,
        out.reshape(-1, hidden),
        total.reshape(-1, hidden),
        mean.reshape(-1),
        inv_std.reshape(-1),
    )
    return out, mean if centered else None, inv_std, total if sum_wanted else None


@KERNELS.register("SkipLayerNormalization", domain=MS)
def _skip_layer_norm(
    ctx: KernelContext,
    x: Array,
    skip: Array,
    gamma: Array,
    beta: Array | None = None,
    bias: Array | None = None,
) -> tuple[Array, Array | None, Array, Array | None]:
    return _skip_normalize(ctx, x, skip, gamma, beta, bias, centered=True)


@KERNELS.register("SkipSimplifiedLayerNormalization", domain=MS)
def _skip_simplified_layer_norm(
    ctx: KernelContext, x: Array, skip: Array, gamma: Array, bias: Array | None = None
) -> tuple[Array, Array | None, Array, Array | None]:
    """Root-mean-square normalization of the sum; it has no mean to give."""
    return _skip_normalize(ctx, x, skip, gamma, None, bias, centered=False)


# EmbedLayerNormalization ---------------------------------------------------------------------


def gathered(table: Array, ids: Array, what: str) -> Array:
    """Rows ``ids`` of an embedding ``table``; out-of-range ids are refused by name."""
    if ids.size and (ids.min() < 0 or ids.max() >= len(table)):
        raise ValueError(f"EmbedLayerNormalization: {what} out of range [0, {len(table)})")
    return table[ids]


def position_ids(given: Array | None, shape: tuple[int, ...]) -> Array:
    """The positions of ``[B, S]`` tokens: ``given`` (``[B, S]`` or ``[1, S]``), else 0 to S - 1."""
    return np.broadcast_to(np.arange(shape[1]) if given is None else given, shape)


def mask_index(mask: Array | None, batch: int) -> Array:
    """Each row's count of mask ones, as int32 (zeros without a mask)."""
    return np.zeros(batch, np.int32) if mask is None else (mask == 1).sum(axis=1, dtype=np.int32)


def _running_mean(values: Array) -> Array:
    """The mean over the last axis summed element by element, as onnxruntime's row loop does."""
    return np.cumsum(values, axis=-1, dtype=values.dtype)[..., -1:] / values.dtype.type(values.shape[-1])


def embed_normalized(
    embeddings: list[Array], gamma: Array, beta: Array, epsilon: float
) -> tuple[Array, Array]:
    """The sum of the gathered ``embeddings`` layer-normalized over the hidden axis, computed as
    onnxruntime does (``(sum - mean) / sqrt(variance + epsilon) * gamma + beta``, each sum in
    order), and the sum itself."""
    total = embeddings[0]
    for rows in embeddings[1:]:
        total = total + rows
    centered = total - _running_mean(total)
    deviation = np.sqrt(_running_mean(centered * centered) + total.dtype.type(epsilon))
    return centered / deviation * gamma + beta, total


@KERNELS.register("EmbedLayerNormalization", domain=MS)
def _embed_layer_norm(
    ctx: KernelContext,
    input_ids: Array,
    segment_ids: Array | None,
    word_embedding: Array,
    position_embedding: Array,
    segment_embedding: Array | None,
    gamma: Array,
    beta: Array,
    mask: Array | None = None,
    positions: Array | None = None,
) -> tuple[Array, Array, Array]:
    """Word, position and segment embeddings summed and layer-normalized, with the mask index
    and the sum."""
    embeddings = [
        widen(gathered(word_embedding, input_ids, "input_ids")),
        widen(gathered(position_embedding, position_ids(positions, input_ids.shape), "position ids")),
    ]
    if segment_embedding is not None and segment_ids is not None:
        embeddings.append(widen(gathered(segment_embedding, segment_ids, "segment_ids")))
    y, total = embed_normalized(embeddings, widen(gamma), widen(beta), ctx.attrs["epsilon"])
    dtype = word_embedding.dtype
    return y.astype(dtype, copy=False), mask_index(mask, len(input_ids)), total.astype(dtype, copy=False)


# Attention -----------------------------------------------------------------------------------

PAST, ATTENTION_BIAS, PAST_SEQUENCE_LENGTH = 4, 5, 6


def _head_sizes(attrs: dict[str, Any], width: int) -> tuple[int, int, int]:
    """The Q, K and V hidden sizes: ``qkv_hidden_sizes``, or a third of the weights' width each."""
    sizes = attrs.get("qkv_hidden_sizes")
    return tuple(sizes) if sizes else (width // 3,) * 3


def _check_attention(node: Node, opset: int) -> str | None:
    attrs = node.attrs
    if (
        attrs.get("do_rotary", 0)
        or attrs.get("past_present_share_buffer", 0)
        or given(node, PAST_SEQUENCE_LENGTH)
    ):
        return "rotary embedding and a shared past/present buffer are not implemented"
    if given(node, PAST) and given(node, ATTENTION_BIAS):
        return "past and attention_bias cannot be used together"
    sizes = attrs.get("qkv_hidden_sizes")
    heads = attrs.get("num_heads", 0)
    if heads < 1 or (sizes and (len(sizes) != 3 or sizes[0] != sizes[1] or any(s % heads for s in sizes))):
        return f"qkv_hidden_sizes={sizes} must be three sizes, Q's equal to K's, each divisible by num_heads"
    if sizes and sizes[1] != sizes[2] and (given(node, PAST) or any(node.outputs[1:])):
        return "past and present need keys and values of the same size"
    return None


def _attention_mask(mask_index: Array, batch: int, queries: int, total: int, filter_value: float) -> Array:
    """The additive ``[B, S, T]`` mask of a mask_index: a raw 0/1 mask (``[B, T]`` or
    ``[B, S, T]``) gives ``filter_value`` where it is 0; key end positions (``[B]``), or end
    then start positions (``[2B]``), mask the keys outside them."""
    shape = (batch, queries, total)
    filler = np.float32(filter_value)
    if mask_index.ndim in (2, 3):
        raw = mask_index if mask_index.ndim == 3 else mask_index[:, None, :]
        return np.broadcast_to(np.where(raw > 0, np.float32(0), filler), shape)
    if mask_index.shape == (batch,):
        ends, starts = mask_index, np.zeros_like(mask_index)
    elif mask_index.shape == (2 * batch,):
        ends, starts = mask_index[:batch], mask_index[batch:]
    else:
        raise ValueError(f"mask_index of shape {list(mask_index.shape)} is not supported on the CPU")
    keys = np.arange(total)
    outside = (keys >= ends[:, None]) | (keys < starts[:, None])
    return np.broadcast_to(np.where(outside, filler, np.float32(0))[:, None, :], shape)


def _causal(mask: Array, past: int) -> Array:
    """Mask every key after each query's own position with the lowest float."""
    queries, total = mask.shape[-2:]
    future = np.arange(total) > past + np.arange(queries)[:, None]
    return np.where(future, np.finfo(np.float32).min, mask)


@KERNELS.register("Attention", domain=MS, check=_check_attention)
def _attention(
    ctx: KernelContext,
    x: Array,
    weights: Array,
    bias: Array | None = None,
    mask_index: Array | None = None,
    past: Array | None = None,
    attention_bias: Array | None = None,
) -> tuple[Array, Array | None]:
    """Multi-head attention over packed Q/K/V projection weights."""
    projected = matmul(widen(x), widen(weights))
    if bias is not None:
        projected = projected + widen(bias)
    return attend(ctx, projected, x.dtype, mask_index, past, attention_bias)


def attend(
    ctx: KernelContext,
    projected: Array,
    dtype: np.dtype,
    mask_index: Array | None,
    past: Array | None,
    attention_bias: Array | None,
) -> tuple[Array, Array | None]:
    """Attention's heads over the packed Q/K/V projections ``[B, S, Q + K + V]`` of its input,
    with an optional key/value cache ``past`` (``[2, B, N, P, H]``) returned extended as
    ``present``; the output in ``dtype``."""
    q_size, k_size, _ = _head_sizes(ctx.attrs, projected.shape[-1])
    q, k, v = np.split(projected, [q_size, q_size + k_size], axis=-1)
    return attend_heads(ctx, q, k, v, dtype, mask_index, past, attention_bias)


def attend_heads(
    ctx: KernelContext,
    query: Array,
    key: Array,
    value: Array,
    dtype: np.dtype,
    mask_index: Array | None,
    past: Array | None,
    attention_bias: Array | None,
) -> tuple[Array, Array | None]:
    """``num_heads`` heads of scaled dot-product attention of ``query [B, S, D]`` over ``key``
    and ``value [B, L, D]`` (after ``past``'s keys and values, where given), with the key mask,
    causality and additive bias of onnxruntime's attention operators."""
    heads = ctx.attrs["num_heads"]
    q, k, v = (split_heads(part, heads) for part in (query, key, value))
    if past is not None:
        k, v = np.concatenate([widen(past[0]), k], axis=2), np.concatenate([widen(past[1]), v], axis=2)
    output, _ = attend_split(ctx.attrs, q, k, v, mask_index, attention_bias)
    wanted = len(ctx.node.outputs) > 1 and ctx.node.outputs[1]
    return output.astype(dtype), np.stack([k, v]).astype(dtype) if wanted else None


def attend_split(
    attrs: dict[str, Any],
    q: Array,
    k: Array,
    v: Array,
    mask_index: Array | None,
    attention_bias: Array | None,
) -> tuple[Array, Array]:
    """Attention of heads ``q [B, N, S, H]`` over ``k`` and ``v [B, N, T, H]``, whose last ``S``
    keys are the queries' own (the rest cached before them), merged to ``[B, S, N * H]``; and the
    scores before the softmax, ``[B, N, S, T]``."""
    past_length = k.shape[2] - q.shape[2]
    scale = attrs.get("scale") or 1 / math.sqrt(q.shape[-1])
    scores = matmul(q, np.swapaxes(k, -1, -2)) * np.float32(scale)
    mask = np.zeros((q.shape[0], q.shape[2], k.shape[2]), np.float32)
    if mask_index is not None:
        mask = _attention_mask(mask_index, *mask.shape, attrs["mask_filter_value"])
    if attrs.get("unidirectional", 0):
        mask = _causal(mask, past_length)
    scores = scores + mask[:, None]
    if attention_bias is not None:
        scores = scores + widen(attention_bias)
    return merge_heads(matmul(softmax(scores), v)), scores


# RotaryEmbedding -----------------------------------------------------------------------------


def _check_rotary(node: Node, opset: int) -> str | None:
    attrs = node.attrs
    if attrs.get("is_packed_batching", 0):
        return "is_packed_batching=1 is not supported"
    if attrs.get("rotary_embedding_dim", 0) and attrs.get("num_heads", 0) < 1:
        return "num_heads must be given with rotary_embedding_dim"
    return None


@KERNELS.register("RotaryEmbedding", domain=MS, check=_check_rotary)
def _rotary_embedding(
    ctx: KernelContext, x: Array, position_ids: Array, cos_cache: Array, sin_cache: Array
) -> Array:
    """Rotate the first ``rotary_embedding_dim`` values of each head by its token's angles:
    halves (``x1 * cos - x2 * sin``, ``x2 * cos + x1 * sin``), or even and odd pairs when
    ``interleaved``. ``x`` is ``[B, S, N * H]`` or ``[B, N, S, H]``; ``position_ids`` is ``[B, S]``,
    or one offset the sequence counts from."""
    attrs = ctx.attrs
    half = cos_cache.shape[1]
    rotary = attrs["rotary_embedding_dim"] or 2 * half
    if x.ndim == 3:
        heads = attrs["num_heads"] or x.shape[-1] // rotary
        tokens = x.reshape(*x.shape[:2], heads, -1)  # [B, S, N, H]
    else:
        tokens = np.swapaxes(x, 1, 2)
    batch, length = tokens.shape[:2]
    if position_ids.size == 1:
        positions = np.broadcast_to(position_ids.reshape(-1)[0] + np.arange(length), (batch, length))
    else:
        positions = position_ids
    y = rotate(widen(tokens), positions, cos_cache, sin_cache, rotary, bool(attrs["interleaved"]))
    y = y.astype(x.dtype, copy=False)
    return y.reshape(x.shape) if x.ndim == 3 else np.swapaxes(y, 1, 2)


def rotate(
    tokens: Array, positions: Array, cos_cache: Array, sin_cache: Array, rotary: int, interleaved: bool
) -> Array:
    """The first ``rotary`` values of each head of ``tokens [B, S, N, H]`` turned by the angles of
    their ``positions [B, S]`` in the caches: halves (``x1 * cos - x2 * sin``, ``x2 * cos + x1 *
    sin``), or even and odd pairs when ``interleaved``."""
    half = rotary // 2
    cos, sin = (widen(cache)[positions][:, :, None, :half] for cache in (cos_cache, sin_cache))
    turned = tokens[..., :rotary]
    if interleaved:
        first, second = turned[..., 0::2], turned[..., 1::2]
        rotated = np.stack([first * cos - second * sin, first * sin + second * cos], axis=-1)
        rotated = rotated.reshape(turned.shape)
    else:
        first, second = turned[..., :half], turned[..., half:]
        rotated = np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
    return np.concatenate([rotated, tokens[..., rotary:]], axis=-1)


# FusedMatMul ---------------------------------------------------------------------------------


def _check_fused_matmul(node: Node, opset: int) -> str | None:
    if node.attrs.get("transBatchA", 0) or node.attrs.get("transBatchB", 0):
        return "transBatchA and transBatchB are not supported"
    return None


@KERNELS.register("FusedMatMul", domain=MS, check=_check_fused_matmul)
def _fused_matmul(ctx: KernelContext, a: Array, b: Array) -> Array:
    """``alpha * A @ B``, either operand's last two axes swapped first where asked."""
    attrs = ctx.attrs
    a, b = (
        np.swapaxes(m, -1, -2) if attrs[flag] and m.ndim >= 2 else m
        for m, flag in ((a, "transA"), (b, "transB"))
    )
    y = matmul(widen(a), widen(b))
    if attrs["alpha"] != 1:
        y = y * y.dtype.type(attrs["alpha"])
    return y.astype(a.dtype, copy=False)


# MatMulNBits ---------------------------------------------------------------------------------

G_IDX, MATMUL_BIAS = 4, 5
NBITS = (2, 4, 8)


def _check_matmul_nbits(node: Node, opset: int) -> str | None:
    attrs = node.attrs
    bits, block = attrs.get("bits", 4), attrs.get("block_size", 0)
    if bits not in NBITS:
        return f"bits={bits} is not one of {list(NBITS)}"
    if block < 16 or block & (block - 1):
        return f"block_size={block} is not a power of two of at least 16"
    if given(node, G_IDX) or attrs.get("weight_prepacked", 0):
        return "g_idx and prepacked weights are not supported"
    return None


def unpack_bits(packed: Array, bits: int) -> Array:
    """Little-endian ``bits``-bit fields of each byte, lowest first, along the last axis."""
    shifts = np.arange(0, 8, bits, dtype=np.uint8)
    fields = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return fields.reshape(*packed.shape[:-1], -1)


def _zero_points(zero_points: Array | None, bits: int, columns: int, blocks: int) -> Array:
    """``[N, blocks]`` zero points: packed ``bits``-bit fields, values in A's type, or the
    middle of the range when absent."""
    if zero_points is None:
        return np.full((columns, blocks), 1 << (bits - 1), dtype=FLOAT32)
    if zero_points.dtype == np.uint8:
        return unpack_bits(zero_points.reshape(columns, -1), bits)[:, :blocks].astype(FLOAT32)
    return widen(zero_points.reshape(columns, blocks))


@KERNELS.register("MatMulNBits", domain=MS, check=_check_matmul_nbits)
def _matmul_nbits(
    ctx: KernelContext,
    a: Array,
    b: Array,
    scales: Array,
    zero_points: Array | None = None,
    g_idx: Array | None = None,
    bias: Array | None = None,
) -> Array:
    """``A @ W^T`` with ``W [N, K]`` stored in blocks of ``block_size`` ``bits``-bit integers,
    each block dequantized as ``(q - zero_point) * scale``."""
    attrs = ctx.attrs
    columns, depth, bits, block = attrs["N"], attrs["K"], attrs["bits"], attrs["block_size"]
    blocks = -(-depth // block)
    quantized = unpack_bits(b.reshape(columns, blocks, -1), bits).astype(FLOAT32)
    offsets = _zero_points(zero_points, bits, columns, blocks)
    block_scales = widen(scales.reshape(columns, blocks))[..., None]
    if _int8_activations(attrs):
        # onnxruntime quantizes A to 8 bits per block and sums the integer products of a block
        # exactly; float64 holds each product and their sum to well within float32 rounding
        weights = (quantized - offsets[..., None]).astype(np.float64) * block_scales
        activations = _int8_blocks(widen(a), block, blocks)
    else:
        weights = (quantized - offsets[..., None]) * block_scales
        activations = widen(a)
    y = matmul(activations, weights.reshape(columns, -1)[:, :depth].T).astype(compute_dtype(a.dtype))
    return (y if bias is None else y + widen(bias)).astype(a.dtype)


#: MatMulNBits' ``accuracy_level`` at which onnxruntime multiplies 8-bit activations.
INT8_ACCURACY = 4


def _int8_activations(attrs: dict[str, Any]) -> bool:
    """Whether onnxruntime's CPU kernel quantizes A to 8 bits: at ``accuracy_level`` 4, save
    for 2-bit weights in blocks of 16."""
    return attrs["accuracy_level"] == INT8_ACCURACY and not (attrs["bits"] == 2 and attrs["block_size"] == 16)


def _int8_blocks(a: Array, block: int, blocks: int) -> Array:
    """``a`` as onnxruntime's 8-bit blocks give it back, in float64: each ``block`` values along K
    rounded to multiples of their largest magnitude / 127 (a float32 scale)."""
    depth = a.shape[-1]
    padded = np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, blocks * block - depth)])
    grouped = padded.reshape(*a.shape[:-1], blocks, block)
    scale = (np.abs(grouped).max(axis=-1, keepdims=True) / np.float32(127)).astype(FLOAT32)
    inverse = np.divide(np.float32(1), scale, out=np.zeros_like(scale), where=scale != 0)
    levels = np.clip(np.rint(grouped * inverse), -127, 127)
    return (levels.astype(np.float64) * scale).reshape(*a.shape[:-1], -1)[..., :depth]


# FusedConv -----------------------------------------------------------------------------------

#: FusedConv's activations that are a clamp to ``(low, high)``, from their parameters, with the
#: parameters' defaults: the convolution applies them as it writes its output.
_CLAMPS: dict[str, tuple[Callable[..., tuple[float, float]], tuple[float, ...]]] = {
    "Relu": (lambda: (0.0, math.inf), ()),
    "Clip": (lambda low, high: (low, high), (-math.inf, math.inf)),
}
#: FusedConv's other activations, with their parameters' defaults: float32 convolutions apply
#: them in the pass that finishes the output (the code of :func:`.loops.activate`, by name),
#: others after it with the numpy function. Swish (SiLU, ``x * sigmoid(x)``) and HardSwish are
#: SpawnML's own (see :mod:`spawnml.passes.conv_activation`).
_AFTER: dict[str, tuple[Callable[..., Array], tuple[float, ...]]] = {
    "Tanh": (np.tanh, ()),
    "Sigmoid": (sigmoid, ()),
    "LeakyRelu": (lambda y, alpha: np.where(y < 0, y * alpha, y), (0.01,)),
    "HardSigmoid": (lambda y, alpha, beta: np.clip(y * alpha + beta, 0, 1), (0.2, 0.5)),
    "Swish": (lambda y: y * sigmoid(y), ()),
    "HardSwish": (lambda y: y * np.clip(y / 6 + 0.5, 0, 1), ()),
}


def _defaults(name: str) -> tuple[float, ...] | None:
    """The defaults of the parameters of FusedConv's activation ``name``; None where it has none."""
    if not name:
        return ()
    found = _CLAMPS.get(name) or _AFTER.get(name)
    return None if found is None else found[1]


def _check_fused_conv(node: Node, opset: int) -> str | None:
    name = as_text(node.attrs.get("activation", ""))
    defaults = _defaults(name)
    if defaults is None:
        return f"activation={name!r} is not one of {['', *_CLAMPS, *_AFTER]}"
    params: Sequence[float] = node.attrs.get("activation_params") or []
    if len(params) > len(defaults):
        return f"{name} takes {len(defaults)} activation_params, got {len(params)}"
    return None


@functools.lru_cache(maxsize=256)
def _fused_activation(
    name: str | bytes, params: tuple[float, ...], dtype: np.dtype
) -> tuple[
    Callable[..., Array] | None, tuple[Any, ...], tuple[Any, Any] | None, tuple[int, float, float] | None
]:
    """FusedConv's activation ``name`` with ``params`` in ``dtype``: the function to apply after
    the convolution and its arguments (None and none where the convolution applies it), the
    clamp the convolution applies, in ``dtype`` (None where there is none), and the activation
    its finishing pass applies (float32 only; None where there is none)."""
    name = as_text(name)
    if name in _CLAMPS:
        bounds, defaults = _CLAMPS[name]
        clamp = bounds(*params, *defaults[len(params) :])
        return None, (), (dtype.type(clamp[0]), dtype.type(clamp[1])), None
    if not name:
        return None, (), None, None
    activation, defaults = _AFTER[name]
    values = params + defaults[len(params) :]
    if dtype == np.float32:
        from . import loops

        codes = {
            "Tanh": loops.TANH,
            "Sigmoid": loops.SIGMOID,
            "LeakyRelu": loops.LEAKY_RELU,
            "HardSigmoid": loops.HARD_SIGMOID,
            "Swish": loops.SWISH,
            "HardSwish": loops.HARD_SWISH,
        }
        alpha, beta = (*values, 0.0, 0.0)[:2] if name != "HardSwish" else (1 / 6, 0.5)
        return None, (), None, (codes[name], float(alpha), float(beta))
    return activation, tuple(dtype.type(value) for value in values), None, None


@KERNELS.register("FusedConv", domain=MS, check=_check_fused_conv)
def _fused_conv(
    ctx: KernelContext, x: Array, w: Array, b: Array | None = None, z: Array | None = None
) -> Array:
    """``activation(Conv(X, W) + B + Z)``."""
    attrs = ctx.attrs
    dtype = compute_dtype(x.dtype)
    params = attrs.get("activation_params")
    activation, arguments, clamp, finish = _fused_activation(
        attrs["activation"], tuple(params) if params else (), dtype
    )
    bias = None if b is None else b.astype(dtype, copy=False)
    residual = None if z is None else widen(z)
    y = convolve(attrs, widen(x), w.astype(dtype, copy=False), bias, clamp, residual, finish)
    if activation is not None:
        y = activation(y, *arguments)
    return y.astype(x.dtype, copy=False)
