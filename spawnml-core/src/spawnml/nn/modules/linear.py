"""``Linear`` and ``Identity``."""

from __future__ import annotations

import math
from typing import Any

from ...autograd.functions.creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init
from .module import Module, Parameter


class Identity(Module):
    """Returns its input (a placeholder that takes any arguments)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """``y = x @ weight.T + bias``, initialised as torch initialises it."""

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, device: str = "cpu", dtype: Any = None
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(empty(out_features, in_features, device=device, dtype=dtype))
        self.register_parameter(
            "bias", Parameter(empty(out_features, device=device, dtype=dtype)) if bias else None
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = init.default_bias_bound(self.weight)
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
        )
