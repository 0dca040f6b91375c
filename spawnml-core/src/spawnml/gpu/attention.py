"""ONNX Attention and RotaryEmbedding on the GPU.

Attention is composed from the shared kernels: heads split by a transpose, the key/value cache
joined by a copy, ``Q K^T`` and ``P V`` as batched matrix products (grouped query heads read their
key head in place, as one taller matrix), the soft cap as a generated elementwise chain, and the
mask, causal and window limits with the softmax in one row kernel. RotaryEmbedding is one kernel.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.ir import f32
from ..kernel.library.attention import attention_softmax
from ..kernel.library.attention import rotary_embedding as rotary_embedding_kernel
from ..kernel.library.chain import step
from ..ops.defs.attention import check_attention
from .array import DeviceArray
from .fused import run_chain, scalar
from .shapes import broadcast_strides
from .table import FLOATS, GPU_KERNELS, GPUContext, concatenate, matmul, permuted, where


def _check(node: Node, opset: int) -> str | None:
    """The operator's rules, and the softmax in float32 (the only precision the GPU computes it in)."""
    return check_attention(node, opset) or float32_softmax(node, opset)


def float32_softmax(node: Node, opset: int) -> str | None:
    """Why the node's softmax is not one the GPU computes (it computes float32 only)."""
    code = node.attrs.get("softmax_precision", 1)
    return None if code == 1 else f"softmax_precision={code}: the GPU computes the softmax in float32 only"


@GPU_KERNELS.register("Attention", since=23, check=_check, dtypes=FLOATS)
def attention(
    ctx: GPUContext,
    q: DeviceArray,
    k: DeviceArray,
    v: DeviceArray,
    mask: DeviceArray | None = None,
    past_key: DeviceArray | None = None,
    past_value: DeviceArray | None = None,
    nonpad_kv_seqlen: DeviceArray | None = None,
) -> tuple[DeviceArray, ...]:
    """Y, the present key and value, and the scores ``qk_matmul_output_mode`` chooses."""
    attrs = ctx.attrs
    packed = len(q.shape) == 3
    if packed:
        q_heads, kv_heads = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
        if not q_heads or not kv_heads:
            raise InvalidArgumentError(
                "3-D Attention inputs need the q_num_heads and kv_num_heads attributes"
            )
        q, k, v = _split(ctx, q, q_heads), _split(ctx, k, kv_heads), _split(ctx, v, kv_heads)
    past = 0 if past_key is None else past_key.shape[2]
    if past_key is not None and past_value is not None:
        k, v = concatenate(ctx, [past_key, k], 2), concatenate(ctx, [past_value, v], 2)
    batch, heads, q_len, size = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    if heads % kv_heads:
        raise InvalidArgumentError(f"{heads} query heads do not group over {kv_heads} key/value heads")
    group = heads // kv_heads
    scale = attrs.get("scale")
    factor = np.float32(1) / np.sqrt(np.float32(size)) if scale is None else np.float32(scale)
    root = np.sqrt(factor)  # Q and K are each scaled by its square root, as the operator defines
    keys = permuted(ctx, scaled(ctx, k, root), [0, 1, 3, 2])
    queries = scaled(ctx, q, root).view((batch, kv_heads, group * q_len, size))
    raw = matmul(ctx, queries, keys).view((batch, heads, q_len, kv_len))
    cap = float(attrs.get("softcap", 0.0))
    capped = _soft_cap(ctx, raw, cap) if cap > 0 else raw
    biased, probs = masked_softmax(ctx, capped, mask, nonpad_kv_seqlen, past)
    y = matmul(ctx, probs.view((batch, kv_heads, group * q_len, kv_len)), v)
    y = y.view((batch, heads, q_len, v.shape[3]))
    if packed:
        y = permuted(ctx, y, [0, 2, 1, 3]).view((batch, q_len, heads * v.shape[3]))
    return y, k, v, (raw, capped, biased, probs)[int(attrs.get("qk_matmul_output_mode", 0))]


def _split(ctx: GPUContext, x: DeviceArray, heads: int) -> DeviceArray:
    """``(batch, sequence, heads * size)`` as ``(batch, heads, sequence, size)``."""
    batch, sequence, hidden = x.shape
    if hidden % heads:
        raise InvalidArgumentError(f"a hidden size of {hidden} does not split into {heads} heads")
    return permuted(ctx, x.view((batch, sequence, heads, hidden // heads)), [0, 2, 1, 3])


def scaled(ctx: GPUContext, x: DeviceArray, factor: np.float32) -> DeviceArray:
    steps = (step("Mul", [0, 1], x.dtype.name),)
    return run_chain(ctx, steps, [x, scalar(ctx, factor)], "attention_scale")


def _soft_cap(ctx: GPUContext, scores: DeviceArray, cap: float) -> DeviceArray:
    """``cap * tanh(scores / cap)``."""
    name = scores.dtype.name
    steps = (step("Div", [0, 1], name), step("Tanh", [2], name), step("Mul", [3, 1], name))
    return run_chain(ctx, steps, [scores, scalar(ctx, cap)], "attention_soft_cap")


def masked_softmax(
    ctx: GPUContext,
    scores: DeviceArray,
    mask: DeviceArray | None,
    lengths: DeviceArray | None,
    past: int,
) -> tuple[DeviceArray, DeviceArray]:
    """The scores with the mask and limits added, and their softmax (zeros where all are masked)."""
    attrs = ctx.attrs
    batch, heads, q_len, kv_len = scores.shape
    if mask is None:
        mask, strides, mask_len = ctx.backend.constant(np.zeros(1, np.float32), np.float32), [0] * 4, kv_len
    else:
        if mask.dtype == np.bool_:
            mask = where(ctx, mask, scalar(ctx, 0.0), scalar(ctx, -np.inf))
        mask_len = mask.shape[-1]
        if mask_len > kv_len or len(mask.shape) > 4:
            raise InvalidArgumentError(
                f"an attention mask of shape {list(mask.shape)} does not fit "
                f"scores of shape {list(scores.shape)}"
            )
        strides = broadcast_strides(mask.shape, (batch, heads, q_len, mask_len))
    padded = lengths is not None
    if lengths is None:
        lengths = ctx.backend.constant(np.zeros(1, np.int32), np.int32)
    biased, probs = (
        ctx.backend.empty(scores.shape, scores.dtype),
        ctx.backend.empty(scores.shape, scores.dtype),
    )
    if scores.size:
        ctx.backend.launch_flat(
            attention_softmax.specialize(T=f32),
            [scores, mask, lengths, biased, probs],
            batch * heads * q_len,
            heads=heads,
            q_len=q_len,
            kv_len=kv_len,
            mask_len=mask_len,
            mask_batch=strides[0],
            mask_head=strides[1],
            mask_query=strides[2],
            mask_key=strides[3],
            past=past,
            padded=int(padded),
            causal=int(attrs.get("is_causal", 0)),
            left=int(attrs.get("left_window_size", -1)),
            right=int(attrs.get("right_window_size", -1)),
            masked=-np.inf,
        )
    return biased, probs


@GPU_KERNELS.register("RotaryEmbedding", since=23, dtypes=FLOATS)
def rotary_embedding(
    ctx: GPUContext,
    x: DeviceArray,
    cos: DeviceArray,
    sin: DeviceArray,
    position_ids: DeviceArray | None = None,
) -> DeviceArray:
    """``(B, H, S, D)`` or ``(B, S, H * D)`` input rotated pairwise by the cached angles."""
    heads_first = len(x.shape) == 4
    if heads_first:
        _, heads, sequence, size = x.shape
    else:
        heads, sequence = int(ctx.attrs.get("num_heads", 0)), x.shape[1]
        if not heads or x.shape[2] % heads:
            raise InvalidArgumentError(
                f"RotaryEmbedding of a 3-D input of shape {list(x.shape)} needs num_heads dividing its "
                "last axis"
            )
        size = x.shape[2] // heads
    rotated = int(ctx.attrs.get("rotary_embedding_dim", 0)) or size
    if rotated % 2 or rotated > size or cos.shape[-1] < rotated // 2:
        raise InvalidArgumentError(
            f"RotaryEmbedding: {rotated} rotated dims of heads of {size} with caches {cos.shape[-1]} wide"
        )
    positions = position_ids or ctx.backend.constant(np.zeros(1, np.int32), np.int32)
    out = ctx.backend.empty(x.shape, x.dtype)
    ctx.backend.launch_flat(
        rotary_embedding_kernel.specialize(T=f32),
        [x, cos, sin, positions, out],
        out.size,
        D=size,
        S=sequence,
        H=heads,
        rotated=rotated,
        cache_width=cos.shape[-1],
        heads_first=int(heads_first),
        indexed=int(position_ids is not None),
        interleaved=int(ctx.attrs.get("interleaved", 0)),
    )
    return out
