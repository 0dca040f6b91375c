"""Normalization: ``layer_norm``, ``batch_norm`` (batch statistics while training, updating the
running ones in place as torch does; running ones in evaluation), ``group_norm``, ``normalize``
and ``cosine_similarity``, written with differentiable operations so their gradients (of any
order) follow."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..mode import no_grad
from .extrema import clamp
from .movement import reshape
from .pointwise import rsqrt
from .reduce import expand, mean, sum
from .statistics import norm


def _normalized(x: Tensor, dims: list[int], eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """``x`` standardized over ``dims`` with the biased variance, its mean and variance."""
    average = mean(x, dims, keepdim=True)
    centered = x - average
    variance = mean(centered * centered, dims, keepdim=True)
    return centered * rsqrt(variance + eps), average, variance


def _affine(x: Tensor, weight: Tensor | None, bias: Tensor | None, shape: Sequence[int]) -> Tensor:
    if weight is not None:
        x = x * reshape(weight, list(shape))
    if bias is not None:
        x = x + reshape(bias, list(shape))
    return x


def layer_norm(
    input: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """``input`` standardized over its last dimensions (``normalized_shape``), then scaled and shifted."""
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if list(input.shape[input.ndim - len(shape) :]) != shape or len(shape) > input.ndim:
        raise InvalidArgumentError(
            f"Given normalized_shape={shape}, expected input with shape [*, {', '.join(map(str, shape))}], "
            f"but got input of size{list(input.shape)}"
        )
    dims = list(range(input.ndim - len(shape), input.ndim))
    out, _, _ = _normalized(input, dims, eps)
    return _affine(out, weight, bias, shape)


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """``input`` (``(N, C, ...)``) standardized per channel. While ``training`` by the batch's
    statistics, moving ``running_mean``/``running_var`` (unbiased) toward them by ``momentum``;
    otherwise by the running statistics."""
    if input.ndim < 2:
        raise InvalidArgumentError(f"batch_norm: expected 2D or more input (got {input.ndim}D input)")
    channels = input.shape[1]
    shape = [1, channels] + [1] * (input.ndim - 2)
    dims = [0, *range(2, input.ndim)]
    count = input.numel() // max(channels, 1)
    if training:
        if count <= 1:
            raise InvalidArgumentError(
                f"Expected more than 1 value per channel when training, got input size {list(input.shape)}"
            )
        out, average, variance = _normalized(input, dims, eps)
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(
                    reshape(average, [channels]).to(running_mean.dtype) * momentum
                )
            if running_var is not None:
                unbiased = reshape(variance, [channels]) * (count / (count - 1))
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype) * momentum)
    else:
        if running_mean is None or running_var is None:
            raise InvalidArgumentError("running_mean and running_var must be defined in evaluation mode")
        out = (input - reshape(running_mean, shape)) * rsqrt(reshape(running_var, shape) + eps)
    return _affine(out, weight, bias, shape)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """``input`` (``(N, C, ...)``) standardized over each group of ``C / num_groups`` channels."""
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise InvalidArgumentError(
            "Expected number of channels in input to be divisible by num_groups, but got input of shape "
            f"{list(input.shape)} and num_groups={num_groups}"
        )
    batch, channels = input.shape[:2]
    grouped = reshape(input, [batch, num_groups, math.prod(input.shape[1:]) // num_groups])
    out, _, _ = _normalized(grouped, [2], eps)
    return _affine(reshape(out, list(input.shape)), weight, bias, [1, channels] + [1] * (input.ndim - 2))


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """``input`` divided by its ``p``-norm over ``dim``, the norm taken as at least ``eps``."""
    return input / clamp(norm(input, p, dim, keepdim=True), min=eps)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """The cosine of the angle between ``x1`` and ``x2`` (broadcast) along ``dim``. As torch,
    each norm is raised to at least ``eps`` in value only: the gradient flows as if it were not."""

    def unit(x: Tensor) -> Tensor:
        length = norm(x, 2, dim, keepdim=True)
        return x / (length + (clamp(length, min=eps) - length).detach())

    shape = list(np.broadcast_shapes(x1.shape, x2.shape))
    return sum(unit(expand(x1, shape)) * unit(expand(x2, shape)), dim)
