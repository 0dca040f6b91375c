"""onnxruntime's contrib operators as it defines them: the com.microsoft activations, GemmFastGelu, BiasAdd,
BiasSoftmax, skip and simplified layer normalization, EmbedLayerNormalization, Attention,
MultiHeadAttention, GroupQueryAttention, RotaryEmbedding, FusedMatMul, MatMulNBits and
FusedConv, and the two normalizations it adds to the ai.onnx domain (LayerNormalization before
opset 17, SimplifiedLayerNormalization)."""

from __future__ import annotations

import numpy as np

from ...dtypes import from_onnx
from ...ir import Dim, Shape
from ..schema import REQUIRED, Attribute, InferenceContext, InferFn, OpSchema, TensorType
from ..shapes import broadcast_inputs, normalize_axis, same_as_input, sliding_windows
from .nn import matmul_shape

MS = "com.microsoft"
FLOAT32 = np.dtype(np.float32)
INT32 = np.dtype(np.int32)


def _input(ctx: InferenceContext, index: int) -> TensorType:
    return ctx.input(index) or TensorType(None, None)


def _statistics(shape: Shape, axis: int) -> Shape:
    """The shape of per-row statistics: the normalized axes kept as 1."""
    if shape is None:
        return None
    first = normalize_axis(axis, len(shape))
    return (*shape[:first], *(1,) * (len(shape) - first))


def _infer_normalization(statistics: int) -> InferFn:
    """Y in the scale's type with the input's shape, then ``statistics`` outputs of type
    ``stash_type``."""

    def infer(ctx: InferenceContext) -> list[TensorType]:
        x = _input(ctx, 0)
        stats = TensorType(from_onnx(ctx.attrs["stash_type"]), _statistics(x.shape, ctx.attrs["axis"]))
        return [TensorType(_input(ctx, 1).dtype, x.shape), *[stats] * statistics]

    return infer


def _infer_skip_normalization(ctx: InferenceContext) -> list[TensorType]:
    x = _input(ctx, 0)
    stats = TensorType(FLOAT32, _statistics(x.shape, -1))
    return [x, stats, stats, x]


def _value_size(ctx: InferenceContext) -> Dim:
    """The width of Attention's output: V's hidden size, or a third of the packed weights."""
    sizes = ctx.attrs.get("qkv_hidden_sizes")
    if sizes:
        return sizes[2]
    weights = _input(ctx, 1).shape
    return weights[1] // 3 if weights and isinstance(weights[1], int) else None


def _infer_attention(ctx: InferenceContext) -> list[TensorType]:
    x = _input(ctx, 0)
    output = None if x.shape is None else (*x.shape[:2], _value_size(ctx))
    return [TensorType(x.dtype, output), TensorType(x.dtype, None)]


def _infer_embed_normalization(ctx: InferenceContext) -> list[TensorType]:
    """``[B, S, H]`` normalized embeddings, the ``[B]`` int32 mask index, the ``[B, S, H]`` sums."""
    ids, words = _input(ctx, 0).shape, _input(ctx, 2)
    width = words.shape[1] if words.shape is not None and len(words.shape) == 2 else None
    tokens = (*ids, width) if ids is not None and len(ids) == 2 else None
    embedded = TensorType(words.dtype, tokens)
    return [embedded, TensorType(INT32, None if ids is None else ids[:1]), embedded]


def _infer_matmul(ctx: InferenceContext) -> list[TensorType]:
    return [TensorType(_input(ctx, 0).dtype, matmul_shape(_input(ctx, 0).shape, _input(ctx, 1).shape))]


def _infer_fused_matmul(ctx: InferenceContext) -> list[TensorType]:
    """``alpha * A @ B`` with either operand's last two axes swapped first where asked."""
    shapes = []
    for index, flag in ((0, "transA"), (1, "transB")):
        shape = _input(ctx, index).shape
        if shape is not None and ctx.attrs[flag] and len(shape) >= 2:
            shape = (*shape[:-2], shape[-1], shape[-2])
        shapes.append(shape)
    return [TensorType(_input(ctx, 0).dtype, matmul_shape(*shapes))]


def _value_width(query: Shape, key: Shape, value: Shape) -> Dim:
    """MultiHeadAttention's output width: V's hidden size, from V ``[B, L, Dv]`` or ``[B, N, L,
    Hv]``, packed K/V ``[B, L, N, 2, H]`` or packed Q/K/V ``[B, S, N, 3, H]``."""
    if value is not None and len(value) in (3, 4):
        return value[-1] if len(value) == 3 else _product(value[1], value[3])
    packed = key if key is not None else query
    return _product(packed[2], packed[4]) if packed is not None and len(packed) == 5 else None


def _product(first: Dim, second: Dim) -> Dim:
    return first * second if isinstance(first, int) and isinstance(second, int) else None


def _infer_multi_head_attention(ctx: InferenceContext) -> list[TensorType]:
    """``[B, S, Dv]``; the present key and value, and the scores, unknown."""
    query = _input(ctx, 0)
    width = _value_width(query.shape, _input(ctx, 1).shape, _input(ctx, 2).shape)
    output = None if query.shape is None or len(query.shape) < 3 else (*query.shape[:2], width)
    return [TensorType(query.dtype, output), *[TensorType(query.dtype, None)] * 3]


def _infer_group_query_attention(ctx: InferenceContext) -> list[TensorType]:
    """``[B, S, N * H]``, the present key and value ``[B, N_kv, T, H]`` (T unknown: the larger
    of the cache's and the total sequence length), and the scores ``[B, N, S, total]``."""
    query, heads, kv_heads = _input(ctx, 0), ctx.attrs["num_heads"], ctx.attrs["kv_num_heads"]
    if query.shape is None or len(query.shape) != 3 or not isinstance(query.shape[2], int):
        return [TensorType(query.dtype, None)] * 4
    packed = ctx.input(1) is None
    head_size = query.shape[2] // (heads + 2 * kv_heads if packed else heads)
    present = TensorType(query.dtype, (query.shape[0], kv_heads, None, head_size))
    return [
        TensorType(query.dtype, (*query.shape[:2], heads * head_size)),
        present,
        present,
        TensorType(query.dtype, (query.shape[0], heads, query.shape[1], None)),
    ]


def _infer_matmul_nbits(ctx: InferenceContext) -> list[TensorType]:
    a = _input(ctx, 0)
    return [TensorType(a.dtype, None if a.shape is None else (*a.shape[:-1], ctx.attrs["N"]))]


def _infer_fused_conv(ctx: InferenceContext) -> list[TensorType]:
    x, w = _input(ctx, 0), _input(ctx, 1)
    if x.shape is None or w.shape is None or len(x.shape) < 3:
        return [TensorType(x.dtype, None)]
    kernel = ctx.attrs.get("kernel_shape") or w.shape[2:]
    ints = [k for k in kernel if isinstance(k, int)]
    if len(ints) != len(kernel):
        return [TensorType(x.dtype, (x.shape[0], w.shape[0], *(None,) * (len(x.shape) - 2)))]
    spatial = tuple(out for out, _, _ in sliding_windows(x.shape[2:], ctx.attrs, ints))
    return [TensorType(x.dtype, (x.shape[0], w.shape[0], *spatial))]


_EPSILON_5 = Attribute("epsilon", "float", float(np.float32(1e-5)))
_EPSILON_12 = Attribute("epsilon", "float", float(np.float32(1e-12)))
_NORMALIZATION = (Attribute("axis", "int", -1), _EPSILON_5, Attribute("stash_type", "int", 1))


def _ms(
    name: str,
    infer: InferFn,
    *attributes: Attribute,
    inputs: tuple[int, int] = (1, 1),
    outputs: tuple[int, int] = (1, 1),
) -> OpSchema:
    return OpSchema(name, domain=MS, inputs=inputs, outputs=outputs, attributes=attributes, infer=infer)


SCHEMAS: list[OpSchema] = [
    _ms("Gelu", same_as_input()),
    _ms("FastGelu", same_as_input(), inputs=(1, 2)),
    _ms("GemmFastGelu", _infer_matmul, inputs=(2, 3)),
    _ms("BiasGelu", broadcast_inputs(), inputs=(2, 2)),
    _ms("QuickGelu", same_as_input(), Attribute("alpha", "float", float(np.float32(1.702)))),
    _ms("BiasAdd", same_as_input(), inputs=(3, 3)),
    _ms(
        "BiasSoftmax",
        same_as_input(),
        Attribute("axis", "int", 1),
        Attribute("is_inner_broadcast", "int", REQUIRED),
        inputs=(2, 2),
    ),
    _ms("SkipLayerNormalization", _infer_skip_normalization, _EPSILON_12, inputs=(3, 5), outputs=(1, 4)),
    _ms(
        "SkipSimplifiedLayerNormalization",
        _infer_skip_normalization,
        _EPSILON_12,
        inputs=(3, 4),
        outputs=(1, 4),
    ),
    OpSchema(
        "LayerNormalization",
        inputs=(2, 3),
        outputs=(1, 3),
        attributes=_NORMALIZATION,
        infer=_infer_normalization(2),
    ),
    OpSchema(
        "SimplifiedLayerNormalization",
        inputs=(2, 2),
        outputs=(1, 2),
        attributes=_NORMALIZATION,
        infer=_infer_normalization(1),
    ),
    _ms(
        "Attention",
        _infer_attention,
        Attribute("num_heads", "int", REQUIRED),
        Attribute("qkv_hidden_sizes", "ints"),
        Attribute("unidirectional", "int", 0),
        Attribute("scale", "float"),
        Attribute("mask_filter_value", "float", -10000.0),
        Attribute("do_rotary", "int", 0),
        Attribute("rotary_embedding_dim", "int", 0),
        Attribute("past_present_share_buffer", "int", 0),
        inputs=(2, 7),
        outputs=(1, 2),
    ),
    _ms(
        "EmbedLayerNormalization",
        _infer_embed_normalization,
        _EPSILON_12,
        Attribute("mask_index_type", "int", 1),
        inputs=(7, 9),
        outputs=(1, 3),
    ),
    _ms(
        "MultiHeadAttention",
        _infer_multi_head_attention,
        Attribute("num_heads", "int", REQUIRED),
        Attribute("mask_filter_value", "float", -10000.0),
        Attribute("scale", "float"),
        Attribute("unidirectional", "int", 0),
        inputs=(1, 10),
        outputs=(1, 4),
    ),
    _ms(
        "GroupQueryAttention",
        _infer_group_query_attention,
        Attribute("num_heads", "int", REQUIRED),
        Attribute("kv_num_heads", "int", REQUIRED),
        Attribute("scale", "float", 0.0),
        Attribute("softcap", "float", 0.0),
        Attribute("local_window_size", "int", -1),
        Attribute("causal", "int", 1),
        Attribute("do_rotary", "int", 0),
        Attribute("rotary_interleaved", "int", 0),
        Attribute("smooth_softmax", "int", -1),
        Attribute("qk_output", "int", 0),
        Attribute("sliding_window_cache", "int", 0),
        Attribute("kv_cache_bit_width", "int", 0),
        Attribute("k_quant_type", "string", "NONE"),
        Attribute("v_quant_type", "string", "NONE"),
        Attribute("qk_norm_epsilon", "float", float(np.float32(1e-6))),
        Attribute("q_norm_epsilon", "float"),
        Attribute("k_norm_epsilon", "float"),
        inputs=(7, 17),
        outputs=(1, 4),
    ),
    _ms(
        "RotaryEmbedding",
        same_as_input(),
        Attribute("interleaved", "int", 0),
        Attribute("is_packed_batching", "int", 0),
        Attribute("num_heads", "int", 0),
        Attribute("rotary_embedding_dim", "int", 0),
        Attribute("scale", "float", 1.0),
        inputs=(4, 4),
    ),
    _ms(
        "FusedMatMul",
        _infer_fused_matmul,
        Attribute("alpha", "float", 1.0),
        Attribute("transA", "int", 0),
        Attribute("transB", "int", 0),
        Attribute("transBatchA", "int", 0),
        Attribute("transBatchB", "int", 0),
        inputs=(2, 2),
    ),
    _ms(
        "MatMulNBits",
        _infer_matmul_nbits,
        Attribute("K", "int", REQUIRED),
        Attribute("N", "int", REQUIRED),
        Attribute("bits", "int", 4),
        Attribute("block_size", "int", REQUIRED),
        Attribute("accuracy_level", "int", 0),
        Attribute("weight_prepacked", "int", 0),
        inputs=(3, 6),
    ),
    _ms(
        "FusedConv",
        _infer_fused_conv,
        Attribute("activation", "string", ""),
        Attribute("activation_params", "floats"),
        Attribute("auto_pad", "string", "NOTSET"),
        Attribute("dilations", "ints"),
        Attribute("group", "int", 1),
        Attribute("kernel_shape", "ints"),
        Attribute("pads", "ints"),
        Attribute("strides", "ints"),
        inputs=(2, 4),
    ),
]
