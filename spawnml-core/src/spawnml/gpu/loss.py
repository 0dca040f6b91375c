"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss on the GPU: per-element terms in one
kernel, then sums over generated reductions (``mean`` divides by the total weight)."""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgumentError
from ..kernel.library.chain import step
from ..kernel.library.loss import nll_terms
from ..kernel.library.reductions import reduce_kernel
from ..kernel.library.scan import log_softmax_rows
from ..ops.shapes import as_text
from .array import DeviceArray
from .fused import run_chain
from .table import FLOATS, GPU_KERNELS, GPUContext


def _total(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    out = ctx.backend.empty((), x.dtype)
    ctx.backend.launch_flat(reduce_kernel("Sum", x.elem), [x, out], 1, D=x.size, inner=1)
    return out


def nll(
    ctx: GPUContext, log_prob: DeviceArray, target: DeviceArray, weight: DeviceArray | None
) -> DeviceArray:
    """The loss of picking class ``target`` from ``log_prob`` ``(N, C, ...)``, reduced as the node says."""
    reduction = as_text(ctx.attrs.get("reduction", "mean"))
    if reduction not in ("none", "sum", "mean"):
        raise InvalidArgumentError(f"{ctx.node.op_type} has no reduction {reduction!r}")
    loss = ctx.backend.empty(target.shape, log_prob.dtype)
    weights = ctx.backend.empty(target.shape, log_prob.dtype)
    ignore = ctx.attrs.get("ignore_index")
    k = nll_terms.specialize(T=log_prob.elem, HAS_IGNORE=ignore is not None, HAS_WEIGHT=weight is not None)
    given = weight if weight is not None else ctx.backend.from_numpy(np.ones(1, np.float32))
    scalars = {
        "classes": log_prob.shape[1],
        "inner": max(math.prod(log_prob.shape[2:]), 1),
        "ignore": 0 if ignore is None else int(ignore),
    }
    ctx.backend.launch_flat(k, [log_prob, target, given, loss, weights], loss.size, **scalars)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return _total(ctx, loss)
    return run_chain(
        ctx, (step("Div", [0, 1], "float32"),), [_total(ctx, loss), _total(ctx, weights)], "nll_mean"
    )


@GPU_KERNELS.register("NegativeLogLikelihoodLoss", since=12, dtypes=FLOATS)
def nll_loss(
    ctx: GPUContext, log_prob: DeviceArray, target: DeviceArray, weight: DeviceArray | None = None
) -> DeviceArray:
    return nll(ctx, log_prob, target, weight)


@GPU_KERNELS.register("SoftmaxCrossEntropyLoss", since=12, dtypes=FLOATS)
def softmax_cross_entropy(
    ctx: GPUContext, scores: DeviceArray, labels: DeviceArray, weight: DeviceArray | None = None
) -> tuple[DeviceArray, DeviceArray]:
    log_prob = ctx.backend.empty(scores.shape, scores.dtype)
    inner = math.prod(scores.shape[2:])
    k = log_softmax_rows.specialize(T=scores.elem)
    ctx.backend.launch_flat(
        k, [scores, log_prob], scores.size // scores.shape[1], D=scores.shape[1], inner=inner
    )
    return nll(ctx, log_prob, labels, weight), log_prob
