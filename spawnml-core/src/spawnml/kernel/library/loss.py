"""The per-element terms of the negative log-likelihood loss."""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, global_id


@kernel(workgroup=(64,))
def nll_terms(
    log_prob: ReadBuffer[T],
    labels: ReadBuffer[i32],
    weight: ReadBuffer[T],
    loss: Buffer[T],
    weights: Buffer[T],
    n: u32,
    width: u32,
    classes: u32,
    inner: u32,
    ignore: i32,
    T: Const[Scalar],
    HAS_IGNORE: Const[bool],
    HAS_WEIGHT: Const[bool],
):
    """For each label ``i`` of ``(N, d...)``: ``loss[i] = -log_prob[n, labels[i], d] * w`` and
    ``weights[i] = w``, the class weight (1 without ``weight``), 0 for the ignored index."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        c = labels[i]
        ignored = HAS_IGNORE and c == ignore
        if ignored:
            c = 0
        w = weight[c] if HAS_WEIGHT else T(1)
        if ignored:
            w = T(0)
        row = i // inner
        picked = log_prob[(row * classes + u32(c)) * inner + i % inner]
        loss[i] = -picked * w
        weights[i] = w
