"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgumentError
from ..tensor import Tensor
from .optimizer import Optimizer, ParamsT, fused_step


class SGD(Optimizer):
    """``torch.optim.SGD``: one ``SGDStep`` per parameter."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        if lr < 0:
            raise InvalidArgumentError(f"Invalid learning rate: {lr}")
        if momentum < 0:
            raise InvalidArgumentError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0:
            raise InvalidArgumentError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise InvalidArgumentError("Nesterov momentum requires a momentum and zero dampening")
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def update(self, param: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        momentum = group["momentum"]
        buffer = state.get("momentum_buffer") if momentum else None
        outputs = fused_step(
            "SGDStep",
            param,
            grad,
            [buffer] if momentum else [],
            lambda: {
                "lr": float(group["lr"]),
                "momentum": float(group["momentum"]),
                "dampening": float(group["dampening"]),
                "weight_decay": float(group["weight_decay"]),
                "nesterov": int(group["nesterov"]),
                "maximize": int(group["maximize"]),
            },
        )
        if momentum and buffer is None:
            state["momentum_buffer"] = outputs[1]
