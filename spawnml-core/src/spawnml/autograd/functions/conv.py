"""Convolutions and their transposes over 1, 2 or 3 spatial dimensions, on ONNX ``Conv`` and
``ConvTranspose``; their gradients are again ``Conv``/``ConvTranspose`` (with reshapes and
transposes), so a backend with those two kernels trains convolutional networks.

Padding is kept in ONNX's form: every spatial dimension's begin, then every dimension's end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import run
from ..function import BackwardNode, Function
from .creation import zeros
from .movement import permute, reshape, squeeze, transpose, unsqueeze
from .reduce import sum
from .shape import narrow

#: A size per spatial dimension, or one for all of them.
Size = int | Sequence[int]
Padding = str | Size


@dataclass(frozen=True)
class Geometry:
    """How the kernel slides: per spatial dimension strides, dilations, and ONNX pads."""

    stride: tuple[int, ...]
    pads: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int

    def attrs(self) -> dict[str, Any]:
        return {
            "strides": list(self.stride),
            "pads": list(self.pads),
            "dilations": list(self.dilation),
            "group": self.groups,
        }

    def swapped(self) -> Geometry:
        """Strides and dilations exchanged: the geometry of the weight gradient's convolution."""
        return Geometry(self.dilation, self.pads, self.stride, self.groups)


class Convolution(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, w: Tensor, b: Tensor | None, geometry: Geometry) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.geometry = geometry
        return run("Conv", [x, w, b], **geometry.attrs())

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None, None]:
        x, w = ctx.saved_tensors
        geometry = ctx.geometry
        return (
            _input_grad(grad, w, x.shape, geometry) if ctx.needs_input_grad[0] else None,
            _weight_grad(x, grad, w.shape, geometry) if ctx.needs_input_grad[1] else None,
            _bias_grad(grad) if ctx.needs_input_grad[2] else None,
            None,
        )


class TransposedConvolution(Function):
    @staticmethod
    def forward(
        ctx: BackwardNode,
        x: Tensor,
        w: Tensor,
        b: Tensor | None,
        geometry: Geometry,
        output_padding: list[int],
    ) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.geometry = geometry
        return run("ConvTranspose", [x, w, b], output_padding=output_padding, **geometry.attrs())

    @staticmethod
    def backward(
        ctx: BackwardNode, grad: Tensor
    ) -> tuple[Tensor | None, Tensor | None, Tensor | None, None, None]:
        x, w = ctx.saved_tensors
        geometry = ctx.geometry
        return (
            Convolution.apply(grad, w, None, geometry) if ctx.needs_input_grad[0] else None,
            _weight_grad(grad, x, w.shape, geometry) if ctx.needs_input_grad[1] else None,
            _bias_grad(grad) if ctx.needs_input_grad[2] else None,
            None,
            None,
        )


def _bias_grad(grad: Tensor) -> Tensor:
    return sum(grad, [d for d in range(grad.ndim) if d != 1])


def _input_grad(grad: Tensor, w: Tensor, input_shape: Sequence[int], geometry: Geometry) -> Tensor:
    """The gradient of a convolution's input: the transposed convolution back to its size."""
    rank = len(input_shape) - 2
    output_padding = []
    for d in range(rank):
        reached = (
            geometry.stride[d] * (grad.shape[2 + d] - 1)
            + geometry.dilation[d] * (w.shape[2 + d] - 1)
            + 1
            - geometry.pads[d]
            - geometry.pads[rank + d]
        )
        output_padding.append(input_shape[2 + d] - reached)
    return TransposedConvolution.apply(grad, w, None, geometry, output_padding)


def _weight_grad(x: Tensor, grad: Tensor, weight_shape: Sequence[int], geometry: Geometry) -> Tensor:
    """The gradient of a convolution's weight as a convolution of ``x`` by ``grad``.

    Per group, the input's channels become the batch and the batch becomes the channels summed
    over; strides and dilations swap roles. The same holds for a transposed convolution with its
    output gradient as ``x`` and its input as ``grad``.
    """
    groups, rank = geometry.groups, x.ndim - 2
    batch, channels, spatial = x.shape[0], x.shape[1], list(x.shape[2:])
    if batch == 0:  # the convolution below would sum over no channels
        return zeros(list(weight_shape), dtype=grad.dtype, device=grad.device)
    outputs = grad.shape[1]
    per_group = channels // groups
    spatial_axes = list(range(3, 3 + rank))
    data = permute(reshape(x, [batch, groups, per_group, *spatial]), [2, 1, 0, *spatial_axes])
    data = reshape(data, [per_group, groups * batch, *spatial])
    kernel = reshape(grad, [batch, groups, outputs // groups, *grad.shape[2:]])
    kernel = reshape(permute(kernel, [1, 2, 0, *spatial_axes]), [outputs, batch, *grad.shape[2:]])
    result = transpose(Convolution.apply(data, kernel, None, geometry.swapped()), 0, 1)
    for d in range(rank):
        if result.shape[2 + d] != weight_shape[2 + d]:
            result = narrow(result, 2 + d, 0, weight_shape[2 + d])
    return result


def per_dimension(value: Size, rank: int, name: str) -> tuple[int, ...]:
    values = (value,) * rank if isinstance(value, int) else tuple(value)
    if len(values) == 1:
        values *= rank
    if len(values) != rank:
        raise InvalidArgumentError(f"expected {name} to be a single integer value or a list of {rank} values")
    return values


def with_batch(input: Tensor, rank: int, name: str) -> tuple[Tensor, bool]:
    """``input`` with a batch dimension, and whether it was added (unbatched input)."""
    if input.ndim == rank + 1:
        return unsqueeze(input, 0), True
    if input.ndim != rank + 2:
        raise InvalidArgumentError(
            f"Expected {rank + 1}D (unbatched) or {rank + 2}D (batched) input to {name}, but got input of "
            f"size: {list(input.shape)}"
        )
    return input, False


def _convolve(
    rank: int,
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Size,
    padding: Padding,
    dilation: Size,
    groups: int,
) -> Tensor:
    name = f"conv{rank}d"
    x, unbatched = with_batch(input, rank, name)
    strides, dilations = per_dimension(stride, rank, "stride"), per_dimension(dilation, rank, "dilation")
    kernel = weight.shape[2:]
    if weight.ndim != rank + 2 or x.shape[1] != weight.shape[1] * groups:
        raise InvalidArgumentError(
            f"Given groups={groups}, weight of size {list(weight.shape)}, expected input{list(x.shape)} to "
            f"have {weight.shape[1] * groups} channels, but got {x.shape[1]} channels instead"
        )
    if weight.shape[0] % groups:
        raise InvalidArgumentError("Given groups, expected weight to be divisible by groups")
    if padding == "valid":
        pads = (0,) * (2 * rank)
    elif padding == "same":
        if any(s != 1 for s in strides):
            raise InvalidArgumentError("padding='same' is not supported for strided convolutions")
        totals = [d * (k - 1) for d, k in zip(dilations, kernel, strict=True)]
        pads = tuple(t // 2 for t in totals) + tuple(t - t // 2 for t in totals)
    elif isinstance(padding, str):
        raise InvalidArgumentError(
            f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}"
        )
    else:
        pads = per_dimension(padding, rank, "padding") * 2
    for d in range(rank):
        if x.shape[2 + d] + pads[d] + pads[rank + d] < dilations[d] * (kernel[d] - 1) + 1:
            raise InvalidArgumentError(
                f"Calculated padded input size per channel: {list(x.shape[2:])}. Kernel size: "
                f"{list(kernel)}. Kernel size can't be greater than actual input size"
            )
    out = Convolution.apply(x, weight, bias, Geometry(strides, pads, dilations, groups))
    return squeeze(out, 0) if unbatched else out


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Size = 1,
    padding: Padding = 0,
    dilation: Size = 1,
    groups: int = 1,
) -> Tensor:
    """A 1-D convolution of ``(N, C, L)`` (or ``(C, L)``) by ``(O, C / groups, K)``; ``padding``
    is a size or "valid"/"same"."""
    return _convolve(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Size = 1,
    padding: Padding = 0,
    dilation: Size = 1,
    groups: int = 1,
) -> Tensor:
    """A 2-D convolution of ``(N, C, H, W)`` (or ``(C, H, W)``) by ``(O, C / groups, KH, KW)``."""
    return _convolve(2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Size = 1,
    padding: Padding = 0,
    dilation: Size = 1,
    groups: int = 1,
) -> Tensor:
    """A 3-D convolution of ``(N, C, D, H, W)`` by ``(O, C / groups, KD, KH, KW)``."""
    return _convolve(3, input, weight, bias, stride, padding, dilation, groups)


def _convolve_transposed(
    rank: int,
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Size,
    padding: Size,
    output_padding: Size,
    groups: int,
    dilation: Size,
) -> Tensor:
    x, unbatched = with_batch(input, rank, f"conv_transpose{rank}d")
    if weight.ndim != rank + 2 or x.shape[1] != weight.shape[0]:
        raise InvalidArgumentError(
            f"Given transposed=1, weight of size {list(weight.shape)}, expected input{list(x.shape)} to have "
            f"{weight.shape[0]} channels, but got {x.shape[1]} channels instead"
        )
    strides, dilations = per_dimension(stride, rank, "stride"), per_dimension(dilation, rank, "dilation")
    extra = list(per_dimension(output_padding, rank, "output_padding"))
    if any(p >= max(s, d) for p, s, d in zip(extra, strides, dilations, strict=True)):
        raise InvalidArgumentError("output padding must be smaller than either stride or dilation")
    geometry = Geometry(strides, per_dimension(padding, rank, "padding") * 2, dilations, groups)
    out = TransposedConvolution.apply(x, weight, bias, geometry, extra)
    return squeeze(out, 0) if unbatched else out


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Size = 1,
    padding: Size = 0,
    output_padding: Size = 0,
    groups: int = 1,
    dilation: Size = 1,
) -> Tensor:
    """The transpose (gradient) of ``conv1d``: ``(N, C, L)`` by ``(C, O / groups, K)``."""
    return _convolve_transposed(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Size = 1,
    padding: Size = 0,
    output_padding: Size = 0,
    groups: int = 1,
    dilation: Size = 1,
) -> Tensor:
    """The transpose (gradient) of ``conv2d``: ``(N, C, H, W)`` by ``(C, O / groups, KH, KW)``."""
    return _convolve_transposed(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Size = 1,
    padding: Size = 0,
    output_padding: Size = 0,
    groups: int = 1,
    dilation: Size = 1,
) -> Tensor:
    """The transpose (gradient) of ``conv3d``: ``(N, C, D, H, W)`` by ``(C, O / groups, KD, KH, KW)``."""
    return _convolve_transposed(3, input, weight, bias, stride, padding, output_padding, groups, dilation)
