"""RMSprop, plain or centered, with momentum and weight decay."""

from __future__ import annotations

from typing import Any

from ..autograd.functions.creation import zeros_like
from ..errors import InvalidArgumentError
from ..tensor import Tensor
from .optimizer import Optimizer, ParamsT, fused_step


class RMSprop(Optimizer):
    """``torch.optim.RMSprop``: one ``RMSpropStep`` per parameter."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        for name, value in (
            ("learning rate", lr),
            ("epsilon value", eps),
            ("momentum value", momentum),
            ("weight_decay value", weight_decay),
            ("alpha value", alpha),
        ):
            if value < 0:
                raise InvalidArgumentError(f"Invalid {name}: {value}")
        defaults = {
            "lr": lr,
            "alpha": alpha,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "centered": centered,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def update(self, param: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if not state:
            state["step"] = 0
            state["square_avg"] = zeros_like(param)
            if group["momentum"] > 0:
                state["momentum_buffer"] = zeros_like(param)
            if group["centered"]:
                state["grad_avg"] = zeros_like(param)
        fused_step(
            "RMSpropStep",
            param,
            grad,
            [state["square_avg"], state.get("momentum_buffer"), state.get("grad_avg")],
            lambda: _attributes(group, state),
        )


def _attributes(group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """The ``RMSpropStep`` attributes of the next step (whose count this advances)."""
    state["step"] += 1
    return {
        "lr": float(group["lr"]),
        "alpha": float(group["alpha"]),
        "eps": float(group["eps"]),
        "weight_decay": float(group["weight_decay"]),
        "momentum": float(group["momentum"]),
        "maximize": int(group["maximize"]),
    }
