"""ai.onnx.preview FlexAttention on the GPU, composed from Attention's kernels.

Q and K are each scaled by the square root of the scale (rounded to the input type, as the
operator defines), ``Q K^T`` and ``P V`` are batched matrix products in which grouped query heads
read their key/value head in place, and the softmax is Attention's row kernel with no mask or
limits (a row of only ``-inf`` scores gives zeros). The ``score_mod`` and ``prob_mod`` subgraphs
run on the device through the session's plan of them, on float32 scores and probabilities.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..ir import Node
from ..ops.defs.attention import PREVIEW, check_softmax_precision
from .array import DeviceArray
from .attention import float32_softmax, masked_softmax, scaled
from .table import GPU_KERNELS, GPUContext, cast_to, matmul, permuted

FLOAT32 = np.dtype(np.float32)
MODIFIERS = ("score_mod", "prob_mod")


def _check(node: Node, opset: int) -> str | None:
    precision = check_softmax_precision(node, opset) or float32_softmax(node, opset)
    if precision is not None:
        return precision
    for name in MODIFIERS:
        body = node.attrs.get(name)
        if body is not None and (len(body.inputs), len(body.outputs)) != (1, 1):
            return (
                f"{name} takes {len(body.inputs)} inputs and returns {len(body.outputs)} outputs; "
                "FlexAttention passes it one tensor and takes one back"
            )
    return None


@GPU_KERNELS.register("FlexAttention", PREVIEW, check=_check, dtypes=(np.float32, np.float16))
def flex_attention(ctx: GPUContext, q: DeviceArray, k: DeviceArray, v: DeviceArray) -> DeviceArray:
    """Y ``(batch, heads, q_len, v_size)`` from rank-4 Q, K and V."""
    if any(len(x.shape) != 4 for x in (q, k, v)):
        raise InvalidArgumentError(
            f"FlexAttention takes rank-4 Q, K and V, not shapes {list(q.shape)}, {list(k.shape)}, "
            f"{list(v.shape)}"
        )
    batch, heads, q_len, size = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    if (k.shape[0], k.shape[3]) != (batch, size) or v.shape[:3] != k.shape[:3]:
        raise InvalidArgumentError(
            f"FlexAttention K {list(k.shape)} and V {list(v.shape)} do not fit Q {list(q.shape)}"
        )
    if heads % kv_heads:
        raise InvalidArgumentError(f"{heads} query heads do not group over {kv_heads} key/value heads")
    group = heads // kv_heads
    scale = ctx.attrs.get("scale")
    factor = np.float32(1) / np.sqrt(np.float32(size)) if scale is None else np.float32(scale)
    root = np.float32(np.sqrt(factor).astype(q.dtype))
    keys = permuted(ctx, scaled(ctx, k, root), [0, 1, 3, 2])
    queries = scaled(ctx, q, root).view((batch, kv_heads, group * q_len, size))
    products = matmul(ctx, queries, keys)
    scores = DeviceArray(products.storage, (batch, heads, q_len, kv_len), FLOAT32)  # as held: float32
    _, probs = masked_softmax(ctx, _modified(ctx, "score_mod", scores), None, None, 0)
    probs = _modified(ctx, "prob_mod", probs)
    y = matmul(ctx, probs.view((batch, kv_heads, group * q_len, kv_len)), v)
    return DeviceArray(y.storage, (batch, heads, q_len, v.shape[3]), v.dtype)


def _modified(ctx: GPUContext, attribute: str, x: DeviceArray) -> DeviceArray:
    """``x`` passed through the node's subgraph ``attribute`` if it has one, as float32."""
    body = ctx.attrs.get(attribute)
    if body is None:
        return x
    assert ctx.run_subgraph is not None  # the planner gives nodes with bodies a runner
    (result,) = ctx.run_subgraph(body, {body.inputs[0].name: x})
    if not isinstance(result, DeviceArray) or result.shape != x.shape:
        got = list(result.shape) if isinstance(result, DeviceArray) else type(result).__name__
        raise InvalidArgumentError(
            f"FlexAttention {attribute} returned {got}, not a tensor of {list(x.shape)}"
        )
    return result if result.dtype == FLOAT32 else cast_to(ctx, result, FLOAT32)
