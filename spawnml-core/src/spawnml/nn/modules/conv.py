"""``Conv1d`` and ``Conv2d`` (zero padding), initialised as torch initialises them."""

from __future__ import annotations

import math
from typing import Any

from ...autograd.functions.creation import empty
from ...errors import InvalidArgumentError
from ...tensor import Tensor
from .. import functional as F
from .. import init
from .module import Module, Parameter

Size = int | tuple[int, ...]


def _tuple(value: Size, n: int) -> tuple[int, ...]:
    return (value,) * n if isinstance(value, int) else tuple(value)


class _ConvNd(Module):
    dims: int

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Size,
        stride: Size = 1,
        padding: Size | str = 0,
        dilation: Size = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: str = "cpu",
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if groups <= 0:
            raise InvalidArgumentError("groups must be a positive integer")
        if in_channels % groups:
            raise InvalidArgumentError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise InvalidArgumentError("out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise InvalidArgumentError(f"padding_mode {padding_mode!r} is not supported (only 'zeros')")
        if isinstance(padding, str) and padding not in ("same", "valid"):
            raise InvalidArgumentError(
                f"Invalid padding string {padding!r}, should be one of ('valid', 'same')"
            )
        n = self.dims
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.dilation = (
            _tuple(kernel_size, n),
            _tuple(stride, n),
            _tuple(dilation, n),
        )
        if padding == "same" and any(s != 1 for s in self.stride):
            raise InvalidArgumentError("padding='same' is not supported for strided convolutions")
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Parameter(empty(*shape, device=device, dtype=dtype))
        self.register_parameter(
            "bias", Parameter(empty(out_channels, device=device, dtype=dtype)) if bias else None
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = init.default_bias_bound(self.weight)
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        text = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        )
        if self.padding != (0,) * self.dims:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * self.dims:
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        return text + ("" if self.bias is not None else ", bias=False")


class Conv1d(_ConvNd):
    """A 1-D convolution over ``(N, C, L)`` inputs."""

    dims = 1

    def forward(self, input: Tensor) -> Tensor:
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    """A 2-D convolution over ``(N, C, H, W)`` inputs."""

    dims = 2

    def forward(self, input: Tensor) -> Tensor:
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
