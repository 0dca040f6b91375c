"""Loss kernels: negative log-likelihood and softmax cross-entropy over ``(N, C, d1, ...)``."""

from __future__ import annotations

import numpy as np
from spawnml.backend import KernelContext
from spawnml.errors import InvalidArgumentError
from spawnml.ir import Node
from spawnml.ops.shapes import as_text

from .nn_common import widen
from .table import KERNELS

REDUCTIONS = ("none", "sum", "mean")


def _check_reduction(node: Node, opset: int) -> str | None:
    reduction = as_text(node.attrs.get("reduction", "mean"))
    return None if reduction in REDUCTIONS else f"reduction={reduction!r} is not one of {list(REDUCTIONS)}"


def negative_log_likelihood(
    log_prob: np.ndarray,
    target: np.ndarray,
    weight: np.ndarray | None,
    ignore_index: int | None,
    reduction: str,
) -> np.ndarray:
    """The loss of picking class ``target`` from ``log_prob`` ``(N, C, ...)``, weighted per class.

    Targets equal to ``ignore_index`` weigh nothing; ``mean`` divides by the total weight.
    """
    ignored = np.zeros(target.shape, bool) if ignore_index is None else target == ignore_index
    classes = np.where(ignored, 0, target).astype(np.intp)
    if np.any((classes < 0) | (classes >= log_prob.shape[1])):
        raise InvalidArgumentError(f"targets must lie in [0, {log_prob.shape[1]}) or be the ignored index")
    picked = np.take_along_axis(log_prob, classes[:, None], axis=1)[:, 0]
    weights = np.ones_like(picked) if weight is None else weight.astype(picked.dtype)[classes]
    weights[ignored] = 0
    loss = -picked * weights
    if reduction == "none":
        return loss
    total = loss.sum()
    return total if reduction == "sum" else total / weights.sum()


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    """``log(softmax(x))`` along ``axis``, computed without overflow."""
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


@KERNELS.register("NegativeLogLikelihoodLoss", since=12, check=_check_reduction)
def _nll_loss(
    ctx: KernelContext, log_prob: np.ndarray, target: np.ndarray, weight: np.ndarray | None = None
) -> np.ndarray:
    loss = negative_log_likelihood(
        widen(log_prob), target, weight, ctx.attrs.get("ignore_index"), as_text(ctx.attrs["reduction"])
    )
    return np.asarray(loss).astype(log_prob.dtype)


@KERNELS.register("SoftmaxCrossEntropyLoss", since=12, check=_check_reduction)
def _softmax_cross_entropy(
    ctx: KernelContext, scores: np.ndarray, labels: np.ndarray, weight: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    log_prob = log_softmax(widen(scores), axis=1)
    loss = negative_log_likelihood(
        log_prob, labels, weight, ctx.attrs.get("ignore_index"), as_text(ctx.attrs["reduction"])
    )
    return np.asarray(loss).astype(scores.dtype), log_prob.astype(scores.dtype)
