"""The operator this plugin adds: ``com.example::Swish``, ``x * sigmoid(beta * x)``."""

from __future__ import annotations

import numpy as np
from spawnml import InvalidGraphError
from spawnml.ops import Attribute, InferenceContext, OpSchema, TensorType

DOMAIN = "com.example"


def infer_swish(ctx: InferenceContext) -> list[TensorType]:
    """One output with the input's dtype and shape; only floating-point inputs are accepted."""
    x = ctx.input(0)
    if x is None:
        return [TensorType(None, None)]
    if x.dtype is not None and x.dtype.kind != "f":
        raise InvalidGraphError(f"Swish takes a floating-point tensor, not {x.dtype}")
    return [x]


SWISH = OpSchema(
    "Swish",
    DOMAIN,
    since_version=1,
    attributes=(Attribute("beta", "float", 1.0),),
    infer=infer_swish,
    doc="x * sigmoid(beta * x), elementwise.",
)


def swish(x: np.ndarray, beta: float) -> np.ndarray:
    """Swish in numpy, through tanh so that no intermediate overflows."""
    half = np.asarray(0.5, dtype=x.dtype)
    return x * (half + half * np.tanh(half * np.asarray(beta, dtype=x.dtype) * x))
