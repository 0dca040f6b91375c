"""The operator: ``org.trial::Mish``, ``x * tanh(softplus(x))``, elementwise."""

from __future__ import annotations

from spawnml import InvalidGraphError
from spawnml.ops import InferenceContext, OpSchema, TensorType

DOMAIN = "org.trial"


def infer_mish(ctx: InferenceContext) -> list[TensorType]:
    """The input's type and shape; only floating-point inputs are accepted."""
    x = ctx.input(0)
    if x is None:
        return [TensorType(None, None)]
    if x.dtype is not None and x.dtype.kind != "f":
        raise InvalidGraphError(f"Mish takes a floating-point tensor, not {x.dtype}")
    return [x]


MISH = OpSchema("Mish", DOMAIN, since_version=1, infer=infer_mish, doc="x * tanh(softplus(x))")
