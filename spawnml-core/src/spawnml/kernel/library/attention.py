"""Attention's own kernels: the masked softmax of its scores, one thread per query row of
``kv_len`` scores, and rotary position embeddings, one thread per element.

In the softmax, each key's bias is the mask's value (or 0 with no mask), ``masked`` (-inf) where
the key lies past the mask's length, past the row's valid keys (``lengths``, a padded external
cache), after the query (``causal``) or outside the sliding window (``left`` / ``right`` keys
before / after the query, -1 for unbounded). The row writes ``biased = score + bias`` and its
softmax, whose all-masked rows (every bias -inf) give zeros, as ONNX Attention defines. Launch
``rows`` (``n``) threads over a 2-D grid of ``width`` threads per grid row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, f32, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, exp, global_id


@kernel(workgroup=(64,))
def attention_softmax(
    scores: ReadBuffer[T],
    mask: ReadBuffer[T],
    lengths: ReadBuffer[i32],
    biased: Buffer[T],
    probs: Buffer[T],
    rows: u32,
    width: u32,
    heads: u32,
    q_len: u32,
    kv_len: u32,
    mask_len: u32,
    mask_batch: u32,
    mask_head: u32,
    mask_query: u32,
    mask_key: u32,
    past: i32,
    padded: u32,
    causal: u32,
    left: i32,
    right: i32,
    masked: f32,
    T: Const[Scalar],
):
    """Rows are ``(batch, heads, q_len)``; the mask is read at ``batch, head, query, key`` strides.

    A query's position is ``past`` plus its index, or with ``padded`` set its batch's
    ``lengths[b] - q_len`` plus its index, and then only the first ``lengths[b]`` keys count.
    """
    r = global_id(1) * width + global_id(0)
    if r < rows:
        i = r % q_len
        b = r // (q_len * heads)
        at = i32(i) + past
        valid = i32(kv_len)
        if padded != 0:
            valid = lengths[b]
            at = i32(i) + valid - i32(q_len)
        base = r * kv_len
        row = b * mask_batch + ((r // q_len) % heads) * mask_head + i * mask_query
        top = T(masked)
        attended = False
        for j in range(kv_len):
            behind = at - i32(j)
            allowed = i32(j) < valid and j < mask_len
            allowed = allowed and (causal == 0 or behind >= 0)
            allowed = allowed and (left < 0 or behind <= left) and (right < 0 or -behind <= right)
            bias = T(masked)
            if allowed:
                bias = mask[row + j * mask_key]
            attended = attended or bias > T(masked)
            value = scores[base + j] + bias
            biased[base + j] = value
            top = max(top, value)
        shift = top if top > T(masked) else T(0)
        total = T(0)
        for j in range(kv_len):
            e = exp(biased[base + j] - shift)
            probs[base + j] = e
            total += e
        if total == T(0):
            total = T(1)
        for j in range(kv_len):
            probs[base + j] = probs[base + j] / total if attended else T(0)


@kernel(workgroup=(64,))
def rotary_embedding(
    x: ReadBuffer[T],
    cos_cache: ReadBuffer[T],
    sin_cache: ReadBuffer[T],
    positions: ReadBuffer[i32],
    out: Buffer[T],
    n: u32,
    width: u32,
    D: u32,
    S: u32,
    H: u32,
    rotated: u32,
    cache_width: u32,
    heads_first: u32,
    indexed: u32,
    interleaved: u32,
    T: Const[Scalar],
):
    """Rotate the first ``rotated`` of each head's ``D`` values by the angles of its position.

    ``x`` is ``(B, H, S, D)`` (``heads_first``) or ``(B, S, H * D)``; ``out`` has its layout. The
    cos / sin row is the position ``positions[b * S + s]`` (``indexed``) or ``b * S + s`` itself,
    ``cache_width`` wide, of which the first ``rotated / 2`` count. Pairs are ``(j, j + rotated / 2)``,
    or ``(2j, 2j + 1)`` when ``interleaved``.
    """
    i = global_id(1) * width + global_id(0)
    if i < n:
        d = i % D
        row = i // D
        s = (row // H) % S
        if heads_first != 0:
            s = row % S
        b = row // (H * S)
        value = x[i]
        if d < rotated:
            pairs = rotated // 2
            j = d % pairs
            first = i - d + j
            second = first + pairs
            upper = d >= pairs
            if interleaved != 0:
                j = d // 2
                first = i - d + 2 * j
                second = first + 1
                upper = d % 2 == 1
            cache = b * S + s
            if indexed != 0:
                cache = u32(positions[b * S + s])
            c = cos_cache[cache * cache_width + j]
            t = sin_cache[cache * cache_width + j]
            value = t * x[first] + c * x[second] if upper else c * x[first] - t * x[second]
        out[i] = value
