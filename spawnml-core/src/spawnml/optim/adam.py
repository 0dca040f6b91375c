"""Adam and AdamW (decoupled weight decay), with AMSGrad."""

from __future__ import annotations

from typing import Any

from ..autograd.functions.creation import zeros_like
from ..errors import InvalidArgumentError
from ..tensor import Tensor
from .optimizer import Optimizer, ParamsT, fused_step


class Adam(Optimizer):
    """``torch.optim.Adam``: one ``AdamStep`` per parameter."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        decoupled_weight_decay: bool = False,
    ) -> None:
        if lr < 0:
            raise InvalidArgumentError(f"Invalid learning rate: {lr}")
        if eps < 0:
            raise InvalidArgumentError(f"Invalid epsilon value: {eps}")
        for index, beta in enumerate(betas):
            if not 0 <= beta < 1:
                raise InvalidArgumentError(f"Invalid beta parameter at index {index}: {beta}")
        if weight_decay < 0:
            raise InvalidArgumentError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "maximize": maximize,
            "decoupled_weight_decay": decoupled_weight_decay,
        }
        super().__init__(params, defaults)

    def update(self, param: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if not state:
            state["step"] = 0
            state["exp_avg"] = zeros_like(param)
            state["exp_avg_sq"] = zeros_like(param)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = zeros_like(param)
        fused_step(
            "AdamStep",
            param,
            grad,
            [state["exp_avg"], state["exp_avg_sq"], state.get("max_exp_avg_sq")],
            lambda: _attributes(group, state),
        )


class AdamW(Adam):
    """``torch.optim.AdamW``: Adam with the weight decay applied to the parameter, not the gradient."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        super().__init__(
            params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, decoupled_weight_decay=True
        )


def _attributes(group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """The ``AdamStep`` attributes of the next step (whose count this advances)."""
    state["step"] += 1
    beta1, beta2 = group["betas"]
    return {
        "lr": float(group["lr"]),
        "beta1": float(beta1),
        "beta2": float(beta2),
        "eps": float(group["eps"]),
        "weight_decay": float(group["weight_decay"]),
        "step": int(state["step"]),
        "decoupled_weight_decay": int(group["decoupled_weight_decay"]),
        "maximize": int(group["maximize"]),
    }
