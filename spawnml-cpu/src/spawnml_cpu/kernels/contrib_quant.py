"""CPU kernels of the quantized forms ``quantize_dynamic`` gives onnxruntime's transformer
operators: QAttention (Attention over a quantized input and quantized packed weights) and
QEmbedLayerNormalization (EmbedLayerNormalization over quantized tables).

As onnxruntime computes them: QAttention's projection is the exact integer product times
``input_scale * weight_scale`` (per column where the weights are per channel) in float32, plus
the bias, then Attention's float heads; QEmbedLayerNormalization dequantizes each gathered
value (``(q - zero_point) * scale``) and normalizes as EmbedLayerNormalization does.
"""

from __future__ import annotations

import numpy as np
from spawnml.backend import KernelContext
from spawnml.ir import Node
from spawnml.ops.defs.contrib import MS

from .contrib import attend, embed_normalized, gathered, mask_index, position_ids
from .nn_common import matmul
from .quant import shifted
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
    accumulated = matmul(shifted(x, input_zero_point), shifted(weights, weight_zero))
    scale = np.float32(input_scale.reshape(-1)[0]) * weight_scale.astype(FLOAT32).reshape(-1)
    projected = accumulated.astype(FLOAT32) * scale + bias.astype(FLOAT32)
    return attend(ctx, projected, FLOAT32, mask, past, None)


def _dequantized(values: Array, scale: Array, zero_point: Array) -> Array:
    return shifted(values, zero_point.reshape(())).astype(FLOAT32) * np.float32(scale.reshape(-1)[0])


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
        _dequantized(gathered(word_embedding, input_ids, "input_ids"), word_scale, word_zero_point),
        _dequantized(
            gathered(position_embedding, positions, "position ids"), position_scale, position_zero_point
        ),
    ]
    segments = (segment_ids, segment_embedding, segment_scale, segment_zero_point)
    if all(given is not None for given in segments):
        ids, table, scale, zero_point = segments
        embeddings.append(_dequantized(gathered(table, ids, "segment_ids"), scale, zero_point))
    y, _ = embed_normalized(
        embeddings,
        _dequantized(gamma, gamma_scale, gamma_zero_point),
        _dequantized(beta, beta_scale, beta_zero_point),
        ctx.attrs["epsilon"],
    )
    return y, mask_index(mask, len(input_ids))
