"""Attention and transformer operators: Attention, FlexAttention, LinearAttention,
RotaryEmbedding, RMSNormalization, Swish and SwiGLU."""

from __future__ import annotations

import numpy as np

from ...ir import Dim, Node, Shape
from ..schema import REQUIRED, Attribute, InferenceContext, OpSchema, TensorType
from ..shapes import as_text, same_as_input

#: The domain of operators ONNX is still trying out.
PREVIEW = "ai.onnx.preview"


def _float(name: str, default: float) -> Attribute:
    """A float attribute; its default rounded to float32, as ONNX stores float attributes."""
    return Attribute(name, "float", float(np.float32(default)))


def _shape(ctx: InferenceContext, index: int) -> Shape:
    value = ctx.input(index)
    return None if value is None else value.shape


def _dtype(ctx: InferenceContext, index: int) -> np.dtype | None:
    value = ctx.input(index)
    return None if value is None else value.dtype


#: ONNX codes of the types a softmax or statistics may be held in: float, float16, double, bfloat16.
FLOAT_CODES = (1, 10, 11, 16)
#: Attention's ``qk_matmul_output_mode`` values: the product, soft-capped, with the bias, after the softmax.
QK_MODES = (0, 1, 2, 3)


def check_softmax_precision(node: Node, opset: int) -> str | None:
    """Why the node's ``softmax_precision`` is not a floating-point type (None if it is)."""
    code = node.attrs.get("softmax_precision", 1)
    return None if code in FLOAT_CODES else f"softmax_precision={code} is not one of {list(FLOAT_CODES)}"


def check_attention(node: Node, opset: int) -> str | None:
    """Why an Attention node cannot run as given (None if it can): its output mode and softmax
    precision, the cache inputs given together and not with ``nonpad_kv_seqlen``, window sizes."""
    attrs, given = node.attrs, [bool(name) for name in node.inputs] + [False] * 7
    if attrs.get("qk_matmul_output_mode", 0) not in QK_MODES:
        return f"qk_matmul_output_mode={attrs['qk_matmul_output_mode']} is not one of {list(QK_MODES)}"
    precision = check_softmax_precision(node, opset)
    if precision is not None:
        return precision
    if given[4] != given[5]:
        return "past_key and past_value must be given together"
    if given[6] and given[4]:
        return "nonpad_kv_seqlen cannot be combined with past_key and past_value"
    if min(attrs.get("left_window_size", -1), attrs.get("right_window_size", -1)) < -1:
        return "window sizes must be -1 (unbounded) or at least 0"
    return None


def check_stash_type(node: Node, opset: int) -> str | None:
    """Why RMSNormalization's ``stash_type`` is not a floating-point type (None if it is)."""
    code = node.attrs.get("stash_type", 1)
    return None if code in FLOAT_CODES else f"stash_type={code} is not a floating-point type"


#: LinearAttention's update rules, each with whether it takes the decay and the beta input.
LINEAR_ATTENTION_RULES = {
    "linear": (False, False),
    "gated": (True, False),
    "delta": (False, True),
    "gated_delta": (True, True),
}


def check_linear_attention(node: Node, opset: int) -> str | None:
    """Why a LinearAttention node cannot run as given (None if it can): its update rule, the decay
    and beta inputs that rule takes, and head counts that group."""
    rule = as_text(node.attrs.get("update_rule", "gated_delta"))
    if rule not in LINEAR_ATTENTION_RULES:
        return f"update_rule={rule!r} is not one of {list(LINEAR_ATTENTION_RULES)}"
    given = [bool(name) for name in node.inputs] + [False] * 6
    for index, name, needed in zip((4, 5), ("decay", "beta"), LINEAR_ATTENTION_RULES[rule], strict=True):
        if given[index] != needed:
            return f"update_rule {rule!r} {'needs' if needed else 'takes no'} {name} input"
    q_heads, kv_heads = node.attrs.get("q_num_heads", 0), node.attrs.get("kv_num_heads", 0)
    if kv_heads <= 0 or q_heads <= 0 or q_heads % kv_heads:
        return f"q_num_heads={q_heads} is not a positive multiple of kv_num_heads={kv_heads}"
    return None


def _quotient(dim: Dim, divisor: Dim) -> Dim:
    return dim // divisor if isinstance(dim, int) and isinstance(divisor, int) and divisor else None


def _product(dim: Dim, factor: Dim) -> Dim:
    return dim * factor if isinstance(dim, int) and isinstance(factor, int) else None


def _sum(first: Dim, second: Dim) -> Dim:
    return first + second if isinstance(first, int) and isinstance(second, int) else None


def _per_head(shape: Shape, heads: Dim) -> tuple[Dim, ...] | None:
    """``(batch, heads, sequence, head_size)`` of a 4-D input, or of a 3-D ``(batch,
    sequence, heads * head_size)`` input split into ``heads``."""
    if shape is None or len(shape) not in (3, 4):
        return None
    if len(shape) == 4:
        return tuple(shape)
    batch, sequence, hidden = shape
    return batch, heads, sequence, _quotient(hidden, heads)


def _infer_attention(ctx: InferenceContext) -> list[TensorType]:
    dtype, query = _dtype(ctx, 0), _shape(ctx, 0)
    q = _per_head(query, ctx.attrs.get("q_num_heads"))
    k = _per_head(_shape(ctx, 1), ctx.attrs.get("kv_num_heads"))
    v = _per_head(_shape(ctx, 2), ctx.attrs.get("kv_num_heads"))
    if query is None or q is None or k is None or v is None:
        return [TensorType(dtype, None)] * 4
    past = _shape(ctx, 4)
    total = k[2] if past is None else _sum(past[2], k[2])
    y = (q[0], q[1], q[2], v[3]) if len(query) == 4 else (q[0], q[2], _product(q[1], v[3]))
    return [
        TensorType(dtype, y),
        TensorType(dtype, (k[0], k[1], total, k[3])),
        TensorType(dtype, (v[0], v[1], total, v[3])),
        TensorType(dtype, (q[0], q[1], q[2], total)),
    ]


def _infer_flex_attention(ctx: InferenceContext) -> list[TensorType]:
    q, v = _shape(ctx, 0), _shape(ctx, 2)
    shape = None if q is None or v is None else (*q[:3], v[3])
    return [TensorType(_dtype(ctx, 0), shape)]


def _infer_linear_attention(ctx: InferenceContext) -> list[TensorType]:
    query, value = _shape(ctx, 0), _shape(ctx, 2)
    q_heads, kv_heads = ctx.attrs["q_num_heads"], ctx.attrs["kv_num_heads"]
    state_dtype = _dtype(ctx, 3) if ctx.input(3) is not None else _dtype(ctx, 0)
    if query is None or value is None:
        return [TensorType(_dtype(ctx, 0), None), TensorType(state_dtype, None)]
    key_size, value_size = _quotient(query[2], q_heads), _quotient(value[2], kv_heads)
    return [
        TensorType(_dtype(ctx, 0), (query[0], query[1], _product(q_heads, value_size))),
        TensorType(state_dtype, (query[0], kv_heads, key_size, value_size)),
    ]


def _infer_rms_norm(ctx: InferenceContext) -> list[TensorType]:
    return [TensorType(_dtype(ctx, 1), _shape(ctx, 0))]


_ATTENTION_23 = (
    Attribute("is_causal", "int", 0),
    Attribute("kv_num_heads", "int"),
    Attribute("q_num_heads", "int"),
    Attribute("qk_matmul_output_mode", "int", 0),
    Attribute("scale", "float"),
    _float("softcap", 0.0),
    Attribute("softmax_precision", "int"),
)
_WINDOWS = (Attribute("left_window_size", "int", -1), Attribute("right_window_size", "int", -1))


def _attention(version: int, inputs: int, attrs: tuple[Attribute, ...]) -> OpSchema:
    return OpSchema(
        "Attention",
        since_version=version,
        inputs=(3, inputs),
        outputs=(1, 4),
        attributes=attrs,
        infer=_infer_attention,
    )


SCHEMAS: list[OpSchema] = [
    _attention(23, 6, _ATTENTION_23),
    _attention(24, 7, _ATTENTION_23),
    _attention(25, 7, (*_ATTENTION_23, *_WINDOWS)),
    OpSchema(
        "FlexAttention",
        domain=PREVIEW,
        inputs=(3, 3),
        attributes=(
            Attribute("prob_mod", "graph"),
            Attribute("scale", "float"),
            Attribute("score_mod", "graph"),
            Attribute("softmax_precision", "int"),
        ),
        infer=_infer_flex_attention,
    ),
    OpSchema(
        "LinearAttention",
        since_version=27,
        inputs=(3, 6),
        outputs=(2, 2),
        attributes=(
            Attribute("chunk_size", "int", 64),
            Attribute("kv_num_heads", "int", REQUIRED),
            Attribute("q_num_heads", "int", REQUIRED),
            _float("scale", 0.0),
            Attribute("update_rule", "string", "gated_delta"),
        ),
        infer=_infer_linear_attention,
    ),
    OpSchema(
        "RotaryEmbedding",
        since_version=23,
        inputs=(3, 4),
        attributes=(
            Attribute("interleaved", "int", 0),
            Attribute("num_heads", "int"),
            Attribute("rotary_embedding_dim", "int", 0),
        ),
        infer=same_as_input(),
    ),
    OpSchema(
        "RMSNormalization",
        since_version=23,
        inputs=(2, 2),
        attributes=(Attribute("axis", "int", -1), _float("epsilon", 1e-5), Attribute("stash_type", "int", 1)),
        infer=_infer_rms_norm,
    ),
    OpSchema("Swish", since_version=24, attributes=(_float("alpha", 1.0),), infer=same_as_input()),
    OpSchema(
        "SwiGLU", since_version=28, inputs=(2, 2), attributes=(_float("alpha", 1.0),), infer=same_as_input()
    ),
]
