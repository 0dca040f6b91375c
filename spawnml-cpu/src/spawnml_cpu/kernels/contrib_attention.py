"""CPU kernels of onnxruntime's attention operators over projected queries, keys and values:
MultiHeadAttention (separate, packed Q/K/V or packed K/V, a key/value cache) and
GroupQueryAttention (grouped key/value heads, a right-padded key/value cache, rotary embedding,
local windows, soft cap, smooth softmax and head sinks), with onnxruntime's semantics.

16-bit floats are computed in float32.
"""

from __future__ import annotations

import math

import numpy as np
from spawnml.backend import KernelContext
from spawnml.errors import InvalidArgumentError
from spawnml.ir import Node

from .attention import merge_heads, repeat_heads, split_heads
from .contrib import MS, attend_split, given, rotate
from .nn_common import matmul, widen
from .table import KERNELS

Array = np.ndarray

# MultiHeadAttention --------------------------------------------------------------------------

#: MultiHeadAttention's optional inputs by position.
MHA_BIAS, MHA_PAST_KEY, MHA_PAST_VALUE, MHA_PAST_SEQUENCE_LENGTH, MHA_CACHE_INDIRECTION = 3, 6, 7, 8, 9


def _check_multi_head_attention(node: Node, opset: int) -> str | None:
    if node.attrs.get("num_heads", 0) < 1:
        return "num_heads must be at least 1"
    if given(node, MHA_PAST_SEQUENCE_LENGTH) or given(node, MHA_CACHE_INDIRECTION):
        return (
            "past_sequence_length and cache_indirection (a shared key/value buffer and beam search, "
            "as onnxruntime.transformers' convert_generation writes for CUDA) are not supported"
        )
    if given(node, MHA_PAST_KEY) != given(node, MHA_PAST_VALUE):
        return "past_key and past_value must be given together"
    if given(node, 2) and not given(node, 1):
        return "value is given without key"
    if given(node, MHA_BIAS) and not given(node, 2):
        return "bias with packed query/key/value or packed key/value is not supported"
    return None


def _unpacked(query: Array, key: Array | None, value: Array | None) -> tuple[Array, Array, Array]:
    """Q ``[B, S, D]`` and K, V ``[B, L, D]`` (or ``[B, N, L, H]``) from separate inputs, packed
    Q/K/V ``[B, S, N, 3, H]`` or packed K/V ``[B, L, N, 2, H]``."""
    if query.ndim == 5 and key is None:
        return tuple(query[:, :, :, part].reshape(*query.shape[:2], -1) for part in range(3))  # type: ignore[return-value]
    if query.ndim == 3 and key is not None and key.ndim == 5 and value is None:
        k, v = (key[:, :, :, part].reshape(*key.shape[:2], -1) for part in range(2))
        return query, k, v
    if query.ndim == 3 and key is not None and value is not None and key.ndim == value.ndim in (3, 4):
        return query, key, value
    shapes = [None if part is None else list(part.shape) for part in (query, key, value)]
    raise InvalidArgumentError(
        f"MultiHeadAttention: query, key and value of shapes {shapes} are none of [B, S, D] with "
        "[B, L, D] or [B, N, L, H], packed [B, S, N, 3, H] or [B, S, D] with packed [B, L, N, 2, H]"
    )


@KERNELS.register("MultiHeadAttention", domain=MS, check=_check_multi_head_attention)
def _multi_head_attention(
    ctx: KernelContext,
    query: Array,
    key: Array | None = None,
    value: Array | None = None,
    bias: Array | None = None,
    key_padding_mask: Array | None = None,
    attention_bias: Array | None = None,
    past_key: Array | None = None,
    past_value: Array | None = None,
) -> tuple[Array, Array | None, Array | None, Array | None]:
    """Attention of projected queries over projected keys and values, each first given the
    projections' ``bias [D + D + Dv]``; keys and values ``[B, N, L, H]`` are an encoder's cache,
    taken as they are. ``past_key`` and ``past_value [B, N, P, H]`` come before the new keys, and
    ``present_key`` and ``present_value`` are the two together; ``qk`` is the scores before the
    softmax, masks and biases added."""
    heads = ctx.attrs["num_heads"]
    parts = [widen(part) for part in _unpacked(query, key, value)]
    per_head = parts[1].ndim == 4
    if per_head and (bias is not None or past_key is not None):
        raise InvalidArgumentError(
            "MultiHeadAttention: keys and values [B, N, L, H] take no bias and no past"
        )
    if bias is not None:
        ends = np.cumsum([part.shape[-1] for part in parts])[:-1]
        parts = [part + widen(share) for part, share in zip(parts, np.split(bias, ends), strict=True)]
    q, k, v = (part if part.ndim == 4 else split_heads(part, heads) for part in parts)
    if past_key is not None and past_value is not None:
        k, v = np.concatenate([widen(past_key), k], axis=2), np.concatenate([widen(past_value), v], axis=2)
    output, scores = attend_split(ctx.attrs, q, k, v, key_padding_mask, attention_bias)
    wanted = [len(ctx.node.outputs) > index and bool(ctx.node.outputs[index]) for index in (1, 2, 3)]
    return (
        output.astype(query.dtype),
        k.astype(query.dtype) if wanted[0] else None,
        v.astype(query.dtype) if wanted[1] else None,
        scores.astype(query.dtype) if wanted[2] else None,
    )


# GroupQueryAttention -------------------------------------------------------------------------

#: GroupQueryAttention's optional inputs by position.
(
    GQA_PAST_KEY,
    GQA_PAST_VALUE,
    GQA_COS,
    GQA_SIN,
    GQA_POSITION_IDS,
    GQA_ATTENTION_BIAS,
    GQA_HEAD_SINK,
    GQA_K_SCALE,
    GQA_V_SCALE,
    GQA_Q_NORM,
    GQA_K_NORM,
    GQA_QUERY_SEQLENS,
) = (3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)


#: GroupQueryAttention's ``qk_output`` values: none, the scores before the softmax, after it.
QK_OUTPUTS = (0, 1, 2)
QK_BEFORE_SOFTMAX = 1


def _check_group_query_attention(node: Node, opset: int) -> str | None:
    attrs = node.attrs
    heads, kv_heads = attrs.get("num_heads", 0), attrs.get("kv_num_heads", 0)
    if kv_heads < 1 or heads < 1 or heads % kv_heads:
        return f"num_heads={heads} is not a positive multiple of kv_num_heads={kv_heads}"
    unsupported = {
        "sliding_window_cache=1 (a window-sized key/value cache)": bool(attrs.get("sliding_window_cache", 0)),
        "a quantized key/value cache (kv_cache_bit_width, k_quant_type, v_quant_type, k_scale, v_scale; "
        "onnxruntime-genai's model builder writes it when asked for one)": (
            bool(attrs.get("kv_cache_bit_width", 0))
            or attrs.get("k_quant_type", "NONE") not in ("NONE", b"NONE")
            or attrs.get("v_quant_type", "NONE") not in ("NONE", b"NONE")
            or given(node, GQA_K_SCALE)
            or given(node, GQA_V_SCALE)
        ),
        "q_norm_weight and k_norm_weight (per-head RMS normalization of Q and K; onnxruntime runs "
        "them on CUDA and WebGPU only)": (given(node, GQA_Q_NORM) or given(node, GQA_K_NORM)),
        f"qk_output={attrs.get('qk_output', 0)}": attrs.get("qk_output", 0) not in QK_OUTPUTS,
    }
    refused = [name for name, present in unsupported.items() if present]
    if refused:
        return f"{', '.join(refused)} not supported"
    if attrs.get("causal", 1) not in (0, 1):
        return f"causal={attrs['causal']} is not 0 or 1"
    if not attrs.get("causal", 1) and attrs.get("local_window_size", -1) != -1:
        return "local_window_size needs causal=1"
    if given(node, GQA_QUERY_SEQLENS) and not (attrs.get("causal", 1) and given(node, GQA_PAST_KEY)):
        return "query_seqlens needs causal=1 and past_key and past_value"
    if given(node, 1) != given(node, 2):
        return "key and value must be given together, or neither (packed QKV)"
    if given(node, GQA_PAST_KEY) != given(node, GQA_PAST_VALUE):
        return "past_key and past_value must be given together"
    if attrs.get("do_rotary", 0) and not (given(node, GQA_COS) and given(node, GQA_SIN)):
        return "do_rotary=1 needs cos_cache and sin_cache"
    return None


def _split_projections(
    query: Array, key: Array | None, value: Array | None, heads: int, kv_heads: int
) -> tuple[Array, Array, Array]:
    """Q ``[B, S, N, H]`` and K, V ``[B, S, N_kv, H]`` from separate or packed projections."""
    batch, length, width = query.shape
    if key is None or value is None:
        size, remainder = divmod(width, heads + 2 * kv_heads)
        if remainder:
            raise InvalidArgumentError(
                f"GroupQueryAttention: packed QKV of width {width} does not split into "
                f"{heads} + 2 * {kv_heads} heads"
            )
        query, key, value = np.split(query, [heads * size, (heads + kv_heads) * size], axis=-1)
    size = query.shape[-1] // heads
    if query.shape[-1] % heads or key.shape[-1] != kv_heads * size or value.shape[-1] != kv_heads * size:
        raise InvalidArgumentError(
            f"GroupQueryAttention: widths {query.shape[-1]}, {key.shape[-1]}, {value.shape[-1]} are not "
            f"{heads} and {kv_heads} heads of one size"
        )
    return tuple(widen(part).reshape(batch, length, -1, size) for part in (query, key, value))  # type: ignore[return-value]


def _cache_starts(totals: Array, length: int, total: int, cached: int) -> Array:
    """How many cached keys precede each batch row's new ones: none for a first prompt (the
    query as long as the total sequence), else the row's total length less the new tokens."""
    if length > 1 and length != total and totals.size != 1:
        raise InvalidArgumentError("GroupQueryAttention: a prompt after a cache needs a batch of one")
    if length == total:
        return np.zeros_like(totals)
    starts = totals - length
    if (starts < 0).any() or (starts > cached).any():
        raise InvalidArgumentError(
            f"GroupQueryAttention: seqlens_k {(totals - 1).tolist()} do not fit {length} new tokens "
            f"after a cache of {cached}"
        )
    return starts


def _chunk_starts(totals: Array, query_seqlens: Array, length: int, cached: int) -> tuple[Array, Array]:
    """Where each row's valid new tokens go, and how many there are, for right-padded chunks of
    ``query_seqlens`` valid tokens each: right after the cached ones, ending at the total."""
    counts = query_seqlens.astype(np.int64).reshape(-1)
    starts = totals - counts
    if (counts < 0).any() or (counts > length).any() or (starts < 0).any() or (starts > cached).any():
        raise InvalidArgumentError(
            f"GroupQueryAttention: query_seqlens {counts.tolist()} and seqlens_k {(totals - 1).tolist()} "
            f"do not fit chunks of {length} after a cache of {cached}"
        )
    return starts, counts


def _extended_cache(past: Array | None, new: Array, starts: Array, counts: Array, length: int) -> Array:
    """The present cache ``[B, N_kv, T, H]``: each row's first ``starts`` cached entries, its
    first ``counts`` new ones after them, zeros beyond."""
    batch, heads, _, size = new.shape
    present = np.zeros((batch, heads, length, size), new.dtype)
    for row, (start, count) in enumerate(zip(starts, counts, strict=True)):
        if past is not None:
            present[row, :, :start] = past[row, :, :start]
        present[row, :, start : start + count] = new[row, :, :count]
    return present


def _allowed_keys(starts: Array, totals: Array, queries: int, keys: int, window: int, causal: bool) -> Array:
    """``[B, 1, S, T]``: the keys each query sees: those within the sequence's total length and,
    when ``causal``, before it or itself; when ``window > 0``, the last ``window`` of those."""
    position = starts[:, None, None, None] + np.arange(queries)[:, None]
    key = np.arange(keys)
    allowed = np.broadcast_to(key < totals[:, None, None, None], (starts.size, 1, queries, keys))
    if causal:
        allowed = allowed & (key <= position)
    if window > 0:
        allowed &= key > position - window
    return allowed


def _softmax_with_sink(scores: Array, allowed: Array, sink: Array | None) -> Array:
    """Softmax over the allowed keys; with ``sink`` (one logit per head, ``[N, 1, 1]``), that
    logit's exponential joins the denominator as a key no value belongs to."""
    masked = np.where(allowed, scores, -np.inf)
    top = masked.max(axis=-1, keepdims=True)
    if sink is not None:
        top = np.maximum(top, sink)
    exponentials = np.exp(masked - top)
    total = exponentials.sum(axis=-1, keepdims=True)
    if sink is not None:
        total = total + np.exp(sink - top)
    return exponentials / total


def _rotary_positions(position_ids: Array | None, starts: Array, length: int, first_prompt: bool) -> Array:
    """``[B, S]`` positions of the new tokens: each row's after its cached ones, or as
    ``position_ids`` gives them; on a first prompt onnxruntime counts every row's from the first
    position id."""
    if position_ids is None:
        return starts[:, None] + np.arange(length)
    if first_prompt:
        return np.broadcast_to(position_ids.reshape(-1)[0] + np.arange(length), (starts.size, length))
    return position_ids.astype(np.int64).reshape(starts.size, length)


@KERNELS.register("GroupQueryAttention", domain=MS, check=_check_group_query_attention)
def _group_query_attention(
    ctx: KernelContext,
    query: Array,
    key: Array | None,
    value: Array | None,
    past_key: Array | None,
    past_value: Array | None,
    seqlens_k: Array,
    total_sequence_length: Array,
    cos_cache: Array | None = None,
    sin_cache: Array | None = None,
    position_ids: Array | None = None,
    attention_bias: Array | None = None,
    head_sink: Array | None = None,
    k_scale: Array | None = None,  # this and the three after it refused by the check
    v_scale: Array | None = None,
    q_norm_weight: Array | None = None,
    k_norm_weight: Array | None = None,
    query_seqlens: Array | None = None,
) -> tuple[Array, Array, Array, Array | None]:
    """Causal attention of ``num_heads`` query heads over ``kv_num_heads`` key/value heads, each
    shared by a contiguous group of query heads. The cache ``past_key``/``past_value [B, N_kv, P,
    H]`` is right-padded: row b holds ``seqlens_k[b] + 1`` keys after this step, the new ones
    written after its cached ones into ``present_key``/``present_value [B, N_kv, max(P, total),
    H]``. Rotary embedding turns the new queries and keys at their positions in the sequence, or
    at ``position_ids``. With ``query_seqlens``, each row's chunk holds that many valid tokens
    (the rest padding), which end at its total length."""
    attrs = ctx.attrs
    heads, kv_heads = attrs["num_heads"], attrs["kv_num_heads"]
    q, k, v = _split_projections(query, key, value, heads, kv_heads)
    length, size = q.shape[1], q.shape[3]
    total = int(total_sequence_length.reshape(-1)[0])
    cached = 0 if past_key is None else past_key.shape[2]
    totals = seqlens_k.astype(np.int64).reshape(-1) + 1
    if query_seqlens is None:
        starts, counts = _cache_starts(totals, length, total, cached), np.full(totals.size, length)
    else:
        starts, counts = _chunk_starts(totals, query_seqlens, length, cached)
    if attrs["do_rotary"]:
        assert cos_cache is not None and sin_cache is not None  # the check asks for both
        positions = _rotary_positions(
            position_ids, starts, length, first_prompt=query_seqlens is None and length == total
        )
        if positions.min() < 0 or positions.max() >= cos_cache.shape[0]:
            raise InvalidArgumentError(
                f"GroupQueryAttention: positions {positions.min()}..{positions.max()} outside the "
                f"{cos_cache.shape[0]} rows of cos_cache"
            )
        interleaved = bool(attrs["rotary_interleaved"])
        q, k = (
            rotate(part, positions, cos_cache, sin_cache, 2 * cos_cache.shape[1], interleaved)
            for part in (q, k)
        )
    present_length = max(total, cached)
    present_key, present_value = (
        _extended_cache(
            None if past is None else widen(past), new.transpose(0, 2, 1, 3), starts, counts, present_length
        )
        for past, new in ((past_key, k), (past_value, v))
    )
    scale = attrs["scale"] or 1 / math.sqrt(size)
    scores = matmul(
        q.transpose(0, 2, 1, 3), np.swapaxes(repeat_heads(present_key, heads), -1, -2)
    ) * np.float32(scale)
    if attrs["softcap"] > 0:
        scores = np.float32(attrs["softcap"]) * np.tanh(scores / np.float32(attrs["softcap"]))
    if attention_bias is not None:
        scores[..., : attention_bias.shape[-1]] += widen(attention_bias)
    sink = None
    if head_sink is not None:
        sink = widen(head_sink).reshape(-1, 1, 1)
    elif attrs["smooth_softmax"] == 1:
        sink = np.zeros((1, 1, 1), scores.dtype)
    window, causal = attrs["local_window_size"], bool(attrs["causal"])
    allowed = _allowed_keys(starts, totals, length, present_length, window, causal)
    probs = _softmax_with_sink(scores, allowed, sink)
    output = merge_heads(matmul(probs, repeat_heads(present_value, heads))).astype(query.dtype)
    qk = None
    if attrs["qk_output"] and len(ctx.node.outputs) > 3 and ctx.node.outputs[3]:
        # the scores before the softmax, or the probabilities; zeros for keys not attended
        shown = scores if attrs["qk_output"] == QK_BEFORE_SOFTMAX else probs
        qk = np.where(allowed, shown, 0)[..., :total].astype(query.dtype)
    return output, present_key.astype(query.dtype), present_value.astype(query.dtype), qk
