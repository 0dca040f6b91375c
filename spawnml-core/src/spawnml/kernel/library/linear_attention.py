"""LinearAttention's recurrence: one thread per value column of one key/value head's state.

Each step changes column ``m`` of a head's ``(key_size, value_size)`` state using that column
alone, so a thread keeps one column for the whole sequence: it decays the column, corrects the
value by what the column already recalls of the key (the delta rule), adds the key times that
value, and reads the column with each of the head's query heads. Launch ``n`` (batch times
key/value heads times ``value_size``) threads over a 2-D grid of ``width`` threads per grid row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, f32, u32
from ..lang import Buffer, Const, ReadBuffer, T, exp, global_id


@kernel(workgroup=(64,))
def linear_attention_scan(
    query: ReadBuffer[T],
    key: ReadBuffer[T],
    value: ReadBuffer[T],
    past: ReadBuffer[T],
    decay: ReadBuffer[T],
    beta: ReadBuffer[T],
    out: Buffer[T],
    state: Buffer[T],
    n: u32,
    width: u32,
    steps: u32,
    q_heads: u32,
    kv_heads: u32,
    key_size: u32,
    value_size: u32,
    decay_width: u32,
    decay_head: u32,
    decay_key: u32,
    beta_width: u32,
    beta_head: u32,
    scale: f32,
    T: Const[Scalar],
    PAST: Const[bool],
    GATED: Const[bool],
    DELTA: Const[bool],
):
    """Query, key and value are ``(batch, steps, heads * size)``; ``out`` is ``(batch, steps,
    q_heads * value_size)`` and ``state`` ``(batch, kv_heads, key_size, value_size)``, starting from
    ``past`` (``PAST``) or zeros. Query heads read key/value head ``h`` in groups of
    ``q_heads / kv_heads``. With ``GATED`` the state is first multiplied by ``exp(decay)``, read at
    ``step * decay_width + head * decay_head + key dim * decay_key``; with ``DELTA`` the value
    written is ``beta * (value - state^T key)``, ``beta`` read at ``step * beta_width + head *
    beta_head``."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        m = i % value_size
        pair = i // value_size
        h = pair % kv_heads
        b = pair // kv_heads
        group = q_heads // kv_heads
        column = pair * key_size * value_size + m
        for d in range(key_size):
            start = T(0)
            if PAST:
                start = past[column + d * value_size]
            state[column + d * value_size] = start
        for t in range(steps):
            row = b * steps + t
            keys = (row * kv_heads + h) * key_size
            written = value[(row * kv_heads + h) * value_size + m]
            recalled = T(0)
            for d in range(key_size):
                held = state[column + d * value_size]
                if GATED:
                    held = held * exp(decay[row * decay_width + h * decay_head + d * decay_key])
                    state[column + d * value_size] = held
                if DELTA:
                    recalled += held * key[keys + d]
            if DELTA:
                written = beta[row * beta_width + h * beta_head] * (written - recalled)
            for d in range(key_size):
                state[column + d * value_size] += key[keys + d] * written
            for g in range(group):
                head = row * q_heads + h * group + g
                total = T(0)
                for d in range(key_size):
                    total += query[head * key_size + d] * state[column + d * value_size]
                out[head * value_size + m] = T(scale) * total
