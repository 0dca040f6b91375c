"""Attention and transformer kernels: Attention (masks, causal and sliding windows, grouped
heads, key/value cache, soft cap), FlexAttention, LinearAttention, RotaryEmbedding,
RMSNormalization, Swish and SwiGLU.

16-bit floats are computed in float32 and rounded where the operator's definition holds a
value in the input type.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from spawnml.backend import KernelContext
from spawnml.dtypes import from_onnx
from spawnml.errors import InvalidArgumentError
from spawnml.ops.defs.attention import (
    PREVIEW,
    check_attention,
    check_linear_attention,
    check_softmax_precision,
    check_stash_type,
)
from spawnml.ops.shapes import normalize_axis

from .checks import run_subgraph
from .nn_common import compute_dtype, matmul, widen
from .table import KERNELS

Array = np.ndarray


def sigmoid(x: Array) -> Array:
    """The logistic function, without overflow for large ``|x|``."""
    return 0.5 * (1 + np.tanh(0.5 * x))


def softmax(x: Array) -> Array:
    """Softmax over the last axis; a row of only ``-inf`` gives zeros instead of NaN."""
    top = x.max(axis=-1, keepdims=True)
    shifted = np.exp(x - np.where(np.isneginf(top), 0, top))
    total = shifted.sum(axis=-1, keepdims=True)
    shifted /= np.where(total == 0, 1, total)
    return shifted


def split_heads(x: Array, heads: int) -> Array:
    """``(batch, sequence, heads * size)`` as ``(batch, heads, sequence, size)``."""
    batch, sequence, hidden = x.shape
    if heads <= 0 or hidden % heads:
        raise InvalidArgumentError(f"a hidden size of {hidden} does not split into {heads} heads")
    return x.reshape(batch, sequence, heads, hidden // heads).transpose(0, 2, 1, 3)


def merge_heads(x: Array) -> Array:
    """``(batch, heads, sequence, size)`` as ``(batch, sequence, heads * size)``."""
    return x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1)


def repeat_heads(x: Array, heads: int) -> Array:
    """Key or value heads shared by ``heads`` query heads, each by a contiguous group."""
    if heads % x.shape[1]:
        raise InvalidArgumentError(f"{heads} query heads do not group over {x.shape[1]} key/value heads")
    return np.repeat(x, heads // x.shape[1], axis=1) if heads != x.shape[1] else x


def scaled_scores(q: Array, k: Array, scale: float | None, dtype: np.dtype) -> Array:
    """``Q @ K^T * scale`` with K's heads grouped to Q's. As the operators' definitions do, the
    scale (default ``1/sqrt(head_size)``) is computed in float32 and Q and K are each scaled
    by its square root rounded to ``dtype``."""
    factor = np.float32(1) / np.sqrt(np.float32(q.shape[-1])) if scale is None else np.float32(scale)
    root = np.asarray(np.sqrt(factor), dtype).astype(q.dtype)
    return matmul(q * root, np.swapaxes(repeat_heads(k, q.shape[1]) * root, -1, -2))


# --- Attention ---------------------------------------------------------------------


def _offset(past: int, nonpad: Array | None, q_len: int) -> int | Array:
    """How many keys precede the query block: the cached length, or per batch row
    ``(B, 1, 1, 1)`` the valid length of an external cache less the query length."""
    if nonpad is None:
        return past
    return (nonpad.astype(np.int64) - q_len).reshape(-1, 1, 1, 1)


def _allowed(attrs: dict[str, Any], q_len: int, kv_len: int, offset: int | Array) -> Array | None:
    """Which keys each query may see under ``is_causal`` and the sliding window, or None for all."""
    causal = bool(attrs["is_causal"])
    left, right = attrs.get("left_window_size", -1), attrs.get("right_window_size", -1)
    if not causal and left < 0 and right < 0:
        return None
    behind = np.arange(q_len)[:, None] + offset - np.arange(kv_len)  # query position minus key index
    allowed = np.ones(behind.shape, bool)
    if causal:
        allowed &= behind >= 0
    if left >= 0:
        allowed &= behind <= left
    if right >= 0:
        allowed &= -behind <= right
    return allowed


def _mask_bias(mask: Array, kv_len: int, work: np.dtype) -> Array:
    """A boolean or additive mask as an additive bias, padded with ``-inf`` to ``kv_len`` keys."""
    bias = np.where(mask, 0, -np.inf).astype(work) if mask.dtype == bool else mask.astype(work)
    missing = kv_len - bias.shape[-1]
    if missing > 0:
        bias = np.pad(bias, [(0, 0)] * (bias.ndim - 1) + [(0, missing)], constant_values=-np.inf)
    return bias


def _attention_bias(
    attrs: dict[str, Any],
    mask: Array | None,
    q_len: int,
    kv_len: int,
    past: int,
    nonpad: Array | None,
    work: np.dtype,
) -> Array | None:
    """The additive bias of the scores: the mask, the causal and window limits and the
    padding of an external cache, each ``-inf`` where a key is not attended."""
    parts = []
    if mask is not None:
        parts.append(_mask_bias(mask, kv_len, work))
    allowed = _allowed(attrs, q_len, kv_len, _offset(past, nonpad, q_len))
    if allowed is not None:
        parts.append(np.where(allowed, 0, -np.inf).astype(work))
    if nonpad is not None:
        valid = np.arange(kv_len) < nonpad.reshape(-1, 1, 1, 1)
        parts.append(np.where(valid, 0, -np.inf).astype(work))
    return sum(parts[1:], parts[0]) if parts else None


def _soft_cap(scores: Array, cap: float) -> Array:
    return cap * np.tanh(scores / cap) if cap > 0 else scores


def _softmax_in(scores: Array, code: int | None, dtype: np.dtype) -> Array:
    """Softmax of ``scores`` held in the type ``code`` names (``dtype`` when None), rounded to it."""
    held = from_onnx(code) if code else dtype
    return softmax(scores.astype(held, copy=False).astype(compute_dtype(held), copy=False)).astype(
        held, copy=False
    )


def _without_empty_rows(probs: Array, bias: Array | None) -> Array:
    """``probs`` with zeros for the queries the bias lets see no key (their softmax is NaN)."""
    empty = None if bias is None else np.isneginf(bias.max(axis=-1, keepdims=True))
    return np.where(empty, 0, probs) if empty is not None and empty.any() else probs


def _split_attention_heads(attrs: dict[str, Any], q: Array, k: Array, v: Array) -> tuple[Array, ...]:
    """3-D Q, K and V split into their heads, ``(batch, heads, sequence, size)``."""
    if not attrs.get("q_num_heads") or not attrs.get("kv_num_heads"):
        raise InvalidArgumentError("3-D Attention inputs need the q_num_heads and kv_num_heads attributes")
    return split_heads(q, attrs["q_num_heads"]), *(split_heads(x, attrs["kv_num_heads"]) for x in (k, v))


@KERNELS.register("Attention", since=23, check=check_attention)
def _attention(
    ctx: KernelContext,
    q: Array,
    k: Array,
    v: Array,
    mask: Array | None = None,
    past_key: Array | None = None,
    past_value: Array | None = None,
    nonpad_kv_seqlen: Array | None = None,
) -> tuple[Array | None, ...]:
    attrs, dtype = ctx.attrs, q.dtype
    packed = q.ndim == 3
    if packed:
        q, k, v = _split_attention_heads(attrs, q, k, v)
    if past_key is not None and past_value is not None:
        k, v = np.concatenate((past_key, k), axis=2), np.concatenate((past_value, v), axis=2)
    past = 0 if past_key is None else past_key.shape[2]
    bias = _attention_bias(attrs, mask, q.shape[2], k.shape[2], past, nonpad_kv_seqlen, compute_dtype(dtype))
    raw = scaled_scores(widen(q), widen(k), attrs.get("scale"), dtype)
    capped = _soft_cap(raw, attrs["softcap"])
    biased = capped if bias is None else capped + bias
    probs = _without_empty_rows(_softmax_in(biased, attrs.get("softmax_precision"), dtype), bias)
    y = matmul(widen(probs.astype(dtype, copy=False)), repeat_heads(widen(v), q.shape[1])).astype(dtype)
    wanted = len(ctx.node.outputs) > 3 and bool(ctx.node.outputs[3])
    qk = (raw, capped, biased, probs)[attrs["qk_matmul_output_mode"]].astype(dtype) if wanted else None
    return merge_heads(y) if packed else y, k, v, qk


# --- FlexAttention -----------------------------------------------------------------


def _modify(ctx: KernelContext, attribute: str, values: Array) -> Array:
    """``values`` passed through the node's modifier subgraph ``attribute``, if it has one."""
    body = ctx.attrs.get(attribute)
    if body is None:
        return values
    (result,) = run_subgraph(ctx, body, {body.inputs[0].name: values})
    return np.asarray(result).astype(values.dtype, copy=False)


@KERNELS.register("FlexAttention", domain=PREVIEW, check=check_softmax_precision)
def _flex_attention(ctx: KernelContext, q: Array, k: Array, v: Array) -> Array:
    code = ctx.attrs.get("softmax_precision")
    held = from_onnx(code) if code else np.dtype(np.float64 if q.dtype == np.float64 else np.float32)
    scores = scaled_scores(widen(q), widen(k), ctx.attrs.get("scale"), q.dtype).astype(held)
    probs = softmax(widen(_modify(ctx, "score_mod", scores))).astype(held)
    values = widen(repeat_heads(v, q.shape[1]).astype(held))
    return matmul(widen(_modify(ctx, "prob_mod", probs)), values).astype(v.dtype)


# --- LinearAttention ---------------------------------------------------------------


def _per_step(gate: Array | None, heads: int, key_size: int) -> Array | None:
    """A decay or beta input ``(B, T, n)`` as ``(B, n or heads, T, size)``: one value for all
    heads or one per head as ``(.., 1)``, or one per key dimension of each head."""
    if gate is None:
        return None
    if gate.shape[-1] in (1, heads):
        return gate.astype(np.float32).transpose(0, 2, 1)[..., None]
    if gate.shape[-1] == heads * key_size:
        return split_heads(gate.astype(np.float32), heads)
    raise InvalidArgumentError(
        f"a gate of {gate.shape[-1]} values per step fits neither {heads} heads nor their keys"
    )


@KERNELS.register("LinearAttention", since=27, check=check_linear_attention)
def _linear_attention(
    ctx: KernelContext,
    query: Array,
    key: Array,
    value: Array,
    past_state: Array | None = None,
    decay: Array | None = None,
    beta: Array | None = None,
) -> tuple[Array, Array]:
    q_heads, kv_heads = ctx.attrs["q_num_heads"], ctx.attrs["kv_num_heads"]
    q, k, v = (
        split_heads(x.astype(np.float32), n)
        for x, n in ((query, q_heads), (key, kv_heads), (value, kv_heads))
    )
    batch, _, steps, key_size = q.shape
    scale = ctx.attrs["scale"] or 1 / math.sqrt(key_size)
    gates, rates = _per_step(decay, kv_heads, key_size), _per_step(beta, kv_heads, key_size)
    state = np.zeros((batch, kv_heads, key_size, v.shape[-1]), np.float32)
    if past_state is not None:
        state = past_state.astype(np.float32)
    grouped = q.reshape(batch, kv_heads, q_heads // kv_heads, steps, key_size)
    out = np.empty((batch, kv_heads, q_heads // kv_heads, steps, v.shape[-1]), np.float32)
    for t in range(steps):
        if gates is not None:
            state = state * np.exp(gates[:, :, t])[..., None]
        update = v[:, :, t]
        if rates is not None:
            update = rates[:, :, t] * (update - np.einsum("bhkv,bhk->bhv", state, k[:, :, t]))
        state = state + k[:, :, t, :, None] * update[:, :, None, :]
        out[:, :, :, t] = scale * np.einsum("bhgk,bhkv->bhgv", grouped[:, :, :, t], state)
    output = merge_heads(out.reshape(batch, q_heads, steps, -1)).astype(query.dtype)
    return output, state.astype(query.dtype if past_state is None else past_state.dtype)


# --- RotaryEmbedding ---------------------------------------------------------------


@KERNELS.register("RotaryEmbedding", since=23)
def _rotary_embedding(
    ctx: KernelContext, x: Array, cos: Array, sin: Array, position_ids: Array | None = None
) -> Array:
    heads_first = x.ndim == 4
    if heads_first:  # (B, H, S, D) -> (B, S, H, D)
        rows = widen(x).transpose(0, 2, 1, 3)
    else:  # (B, S, H * D) -> (B, S, H, D)
        heads = ctx.attrs.get("num_heads")
        if not heads:
            raise InvalidArgumentError("RotaryEmbedding of a 3-D input needs the num_heads attribute")
        rows = widen(x).reshape(*x.shape[:2], heads, -1)
    if position_ids is not None:
        cos, sin = cos[position_ids], sin[position_ids]
    rotated = ctx.attrs["rotary_embedding_dim"] or rows.shape[-1]
    half = rotated // 2
    cos, sin = widen(cos)[..., None, :half], widen(sin)[..., None, :half]
    turned = rows[..., :rotated]
    interleaved = bool(ctx.attrs["interleaved"])
    first, second = (
        (turned[..., 0::2], turned[..., 1::2]) if interleaved else (turned[..., :half], turned[..., half:])
    )
    pair = (cos * first - sin * second, sin * first + cos * second)
    turned = np.stack(pair, axis=-1).reshape(turned.shape) if interleaved else np.concatenate(pair, axis=-1)
    y = np.concatenate((turned, rows[..., rotated:]), axis=-1)
    return (y.transpose(0, 2, 1, 3) if heads_first else y.reshape(x.shape)).astype(x.dtype)


# --- RMSNormalization --------------------------------------------------------------


@KERNELS.register("RMSNormalization", since=23, check=check_stash_type)
def _rms_normalization(ctx: KernelContext, x: Array, scale: Array) -> Array:
    stash = from_onnx(ctx.attrs["stash_type"])
    held = x.astype(compute_dtype(stash))
    axes = tuple(range(normalize_axis(ctx.attrs["axis"], x.ndim), x.ndim))
    mean_square = (held * held).mean(axis=axes, keepdims=True)
    normalized = (held / np.sqrt(mean_square + held.dtype.type(ctx.attrs["epsilon"]))).astype(stash)
    return (widen(normalized.astype(x.dtype)) * widen(scale)).astype(scale.dtype)


# --- Swish and SwiGLU --------------------------------------------------------------


@KERNELS.register("Swish", since=24)
def _swish(ctx: KernelContext, x: Array) -> Array:
    work = widen(x)
    return (work * sigmoid(ctx.attrs["alpha"] * work)).astype(x.dtype)


@KERNELS.register("SwiGLU", since=28)
def _swiglu(ctx: KernelContext, a: Array, b: Array) -> Array:
    gate = widen(a)
    return (gate * sigmoid(ctx.attrs["alpha"] * gate) * widen(b)).astype(a.dtype)
