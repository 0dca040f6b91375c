"""Loss operators: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Versions 13 and 22 only widened the accepted element types, so version 12 covers them.
"""

from __future__ import annotations

from ..schema import Attribute, InferenceContext, OpSchema, TensorType
from ..shapes import as_text

_ATTRS = (Attribute("ignore_index", "int"), Attribute("reduction", "string", "mean"))


def _infer_loss(ctx: InferenceContext) -> list[TensorType]:
    """The loss (per element of the target when unreduced, else a scalar) and the log-probabilities."""
    scores = ctx.input(0) or TensorType(None, None)
    target = ctx.input(1)
    if as_text(ctx.attrs["reduction"]) != "none":
        loss = TensorType(scores.dtype, ())
    else:
        loss = TensorType(scores.dtype, None if target is None else target.shape)
    return [loss, scores]


SCHEMAS: list[OpSchema] = [
    OpSchema(
        "NegativeLogLikelihoodLoss", since_version=12, inputs=(2, 3), attributes=_ATTRS, infer=_infer_loss
    ),
    OpSchema(
        "SoftmaxCrossEntropyLoss",
        since_version=12,
        inputs=(2, 3),
        outputs=(1, 2),
        attributes=_ATTRS,
        infer=_infer_loss,
    ),
]
