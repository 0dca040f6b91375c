"""ONNX LinearAttention on the GPU: the whole recurrence in one launch.

Query, key, value, decay and beta are read in their packed ``(batch, steps, heads * size)``
layout, so nothing is transposed; the state lives in the ``present_state`` output from the
first step to the last (see :mod:`spawnml.kernel.library.linear_attention`).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgumentError
from ..kernel.ir import f32
from ..kernel.library.linear_attention import linear_attention_scan
from ..ops.defs.attention import check_linear_attention
from .array import DeviceArray
from .table import GPU_KERNELS, GPUContext


@GPU_KERNELS.register(
    "LinearAttention", since=27, check=check_linear_attention, dtypes=(np.float32, np.float16)
)
def linear_attention(
    ctx: GPUContext,
    query: DeviceArray,
    key: DeviceArray,
    value: DeviceArray,
    past_state: DeviceArray | None = None,
    decay: DeviceArray | None = None,
    beta: DeviceArray | None = None,
) -> tuple[DeviceArray, DeviceArray]:
    """The output ``(batch, steps, q_heads * value_size)`` and the state after the last step."""
    q_heads, kv_heads = int(ctx.attrs["q_num_heads"]), int(ctx.attrs["kv_num_heads"])
    for name, x in (("query", query), ("key", key), ("value", value), ("decay", decay), ("beta", beta)):
        if x is not None and (len(x.shape) != 3 or x.shape[:2] != query.shape[:2]):
            raise InvalidArgumentError(
                f"LinearAttention {name} of shape {list(x.shape)} is not (batch, steps, ...) like the "
                f"query's {list(query.shape)}"
            )
    batch, steps = query.shape[:2]
    key_size, value_size = _head_size(query, q_heads, "query"), _head_size(value, kv_heads, "value")
    if key.shape[2] != kv_heads * key_size:
        raise InvalidArgumentError(
            f"LinearAttention key of {key.shape[2]} values per step is not {kv_heads} heads of {key_size}"
        )
    state_shape = (batch, kv_heads, key_size, value_size)
    if past_state is not None and past_state.shape != state_shape:
        raise InvalidArgumentError(
            f"LinearAttention past_state of shape {list(past_state.shape)} is not {list(state_shape)}"
        )
    for x in (past_state, decay, beta):
        if x is not None and x.elem != f32:
            raise InvalidArgumentError(f"LinearAttention on the GPU takes float tensors, not {x.dtype}")
    decay_head, decay_key = _decay_strides(decay, kv_heads, key_size)
    beta_head = _beta_stride(beta, kv_heads)
    out = ctx.backend.empty((batch, steps, q_heads * value_size), query.dtype)
    state = ctx.backend.empty(state_shape, query.dtype if past_state is None else past_state.dtype)
    unused = ctx.backend.constant(np.zeros(1, np.float32), np.float32)
    kernel = linear_attention_scan.specialize(
        T=f32, PAST=past_state is not None, GATED=decay is not None, DELTA=beta is not None
    )
    ctx.backend.launch_flat(
        kernel,
        [query, key, value, past_state or unused, decay or unused, beta or unused, out, state],
        batch * kv_heads * value_size,
        steps=steps,
        q_heads=q_heads,
        kv_heads=kv_heads,
        key_size=key_size,
        value_size=value_size,
        decay_width=1 if decay is None else decay.shape[2],
        decay_head=decay_head,
        decay_key=decay_key,
        beta_width=1 if beta is None else beta.shape[2],
        beta_head=beta_head,
        scale=float(ctx.attrs.get("scale") or 1 / math.sqrt(key_size)),
    )
    return out, state


def _head_size(x: DeviceArray, heads: int, name: str) -> int:
    if x.shape[2] % heads:
        raise InvalidArgumentError(
            f"LinearAttention {name} of {x.shape[2]} values per step does not split into {heads} heads"
        )
    return x.shape[2] // heads


def _decay_strides(decay: DeviceArray | None, heads: int, key_size: int) -> tuple[int, int]:
    """How far apart a step's decay values are per head and per key dim: one per head, or one per
    key dim of each head."""
    if decay is None:
        return 0, 0
    width = decay.shape[2]
    if width == heads:
        return 1, 0
    if width == heads * key_size:
        return key_size, 1
    raise InvalidArgumentError(
        f"a LinearAttention decay of {width} values per step fits neither {heads} heads nor their "
        f"{heads * key_size} key dims"
    )


def _beta_stride(beta: DeviceArray | None, heads: int) -> int:
    """How far apart a step's beta values are per head: one value for all heads or one per head."""
    width = 1 if beta is None else beta.shape[2]
    if width not in (1, heads):
        raise InvalidArgumentError(f"a LinearAttention beta of {width} values per step is not 1 or {heads}")
    return 1 if width == heads else 0
