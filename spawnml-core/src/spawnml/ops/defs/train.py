"""One fused update per optimizer: ``ai.spawnml.train::SGDStep``, ``AdamStep`` and ``RMSpropStep``.

Each takes a parameter, its gradient and the optimizer's state for it, and returns the updated
parameter and state, computed as ``torch.optim`` computes them (single-tensor implementation,
float32 arithmetic, hyperparameters as attributes). The optimizer writes the outputs back in
place. Optional state is an omitted input and output:

- ``SGDStep(param, grad, momentum_buffer?) -> (param, momentum_buffer?)``: with ``momentum``
  set, an omitted buffer is the first step, where the buffer starts as the gradient.
- ``AdamStep(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq?) -> (param, exp_avg, exp_avg_sq,
  max_exp_avg_sq?)``: ``step`` counts from 1; the fifth input turns AMSGrad on;
  ``decoupled_weight_decay`` makes it AdamW.
- ``RMSpropStep(param, grad, square_avg, momentum_buffer?, grad_avg?) -> (param, square_avg,
  momentum_buffer?, grad_avg?)``: a momentum buffer applies ``momentum``; ``grad_avg``
  makes it centered.
"""

from __future__ import annotations

from ..schema import REQUIRED, Attribute, InferenceContext, OpSchema, TensorType

DOMAIN = "ai.spawnml.train"


def _infer_like_inputs(ctx: InferenceContext) -> list[TensorType]:
    """Output 0 is the parameter; every other output is the state input at the same position + 1."""
    param = ctx.input(0) or TensorType(None, None)
    state = [ctx.input(i) or param for i in range(2, len(ctx.node.inputs))]
    return [param, *state][: len(ctx.node.outputs)]


def _infer_sgd(ctx: InferenceContext) -> list[TensorType]:
    param = ctx.input(0) or TensorType(None, None)
    return [param, param][: len(ctx.node.outputs)]


_LR = Attribute("lr", "float", REQUIRED)
_WEIGHT_DECAY = Attribute("weight_decay", "float", 0.0)
_MAXIMIZE = Attribute("maximize", "int", 0)

SCHEMAS: list[OpSchema] = [
    OpSchema(
        "SGDStep",
        domain=DOMAIN,
        inputs=(2, 3),
        outputs=(1, 2),
        attributes=(
            _LR,
            Attribute("momentum", "float", 0.0),
            Attribute("dampening", "float", 0.0),
            _WEIGHT_DECAY,
            Attribute("nesterov", "int", 0),
            _MAXIMIZE,
        ),
        infer=_infer_sgd,
        doc=__doc__ or "",
    ),
    OpSchema(
        "AdamStep",
        domain=DOMAIN,
        inputs=(4, 5),
        outputs=(3, 4),
        attributes=(
            _LR,
            Attribute("beta1", "float", 0.9),
            Attribute("beta2", "float", 0.999),
            Attribute("eps", "float", 1e-8),
            _WEIGHT_DECAY,
            Attribute("step", "int", REQUIRED),
            Attribute("decoupled_weight_decay", "int", 0),
            _MAXIMIZE,
        ),
        infer=_infer_like_inputs,
        doc=__doc__ or "",
    ),
    OpSchema(
        "RMSpropStep",
        domain=DOMAIN,
        inputs=(3, 5),
        outputs=(2, 4),
        attributes=(
            _LR,
            Attribute("alpha", "float", 0.99),
            Attribute("eps", "float", 1e-8),
            _WEIGHT_DECAY,
            Attribute("momentum", "float", 0.0),
            _MAXIMIZE,
        ),
        infer=_infer_like_inputs,
        doc=__doc__ or "",
    ),
]
