"""SpawnML's own fused operators: ``ai.spawnml::FusedElementwise``.

FusedElementwise computes a chain of elementwise operators (unary, broadcasting binary and
variadic ones, Clip, Where, casts, activations) in one kernel. Its ``chain`` attribute is JSON,
a list of steps ``[op, inputs, dtype, attrs]``: ``inputs`` index the node's inputs and then the
results of earlier steps (input count + step index), ``dtype`` is the step result's numpy type
name and ``attrs`` the operator's attributes. The output is the last step's result, with the
inputs' broadcast shape. The graph optimizer makes these nodes (level ``all``); see
:mod:`spawnml.kernel.library.chain`.
"""

from __future__ import annotations

import json

import numpy as np

from ..schema import REQUIRED, Attribute, InferenceContext, OpSchema, TensorType
from ..shapes import broadcast_inputs

DOMAIN = "ai.spawnml"


def _infer_fused_elementwise(ctx: InferenceContext) -> list[TensorType]:
    (shaped,) = broadcast_inputs()(ctx)
    steps = json.loads(ctx.attrs["chain"])
    return [TensorType(np.dtype(steps[-1][2]) if steps else None, shaped.shape)]


SCHEMAS: list[OpSchema] = [
    OpSchema(
        "FusedElementwise",
        domain=DOMAIN,
        inputs=(1, -1),
        attributes=(Attribute("chain", "string", REQUIRED),),
        infer=_infer_fused_elementwise,
        doc=__doc__ or "",
    ),
]
