"""Pooling over 1, 2 or 3 spatial dimensions: max (with torch's per-plane indices; its gradient
goes back through them), average (a convolution by ones, divided as torch divides) and adaptive
average (products with averaging matrices)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, overload

import numpy as np

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import constant, run
from ..function import BackwardNode, Function
from .conv import Convolution, Geometry, Size, per_dimension, with_batch
from .creation import zeros
from .indexing import Scatter, ScatterAdd
from .linalg import matmul
from .movement import reshape, squeeze, transpose
from .promotion import DEFAULT_INT


def _output_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool) -> int:
    """torch's pooled length: with ``ceil_mode`` a last partial window counts if it starts inside
    the input or its left padding."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _geometry(
    name: str,
    x: Tensor,
    rank: int,
    kernel_size: Size,
    stride: Size | None,
    padding: Size,
    dilation: Size,
    ceil_mode: bool,
) -> tuple[tuple[int, ...], Geometry, list[int]]:
    """Kernel, geometry (ONNX pads extended on the right for ``ceil_mode``) and output size."""
    kernel = per_dimension(kernel_size, rank, "kernel_size")
    strides = kernel if stride is None or stride == [] else per_dimension(stride, rank, "stride")
    pads = per_dimension(padding, rank, "padding")
    dilations = per_dimension(dilation, rank, "dilation")
    for k, p, d in zip(kernel, pads, dilations, strict=True):
        if p > (d * (k - 1) + 1) // 2:
            raise InvalidArgumentError(
                f"{name}: pad should be at most half of effective kernel size, but got pad={p}, "
                f"kernel_size={k} and dilation={d}"
            )
    sizes = x.shape[2:]
    outputs = [
        _output_size(n, k, s, p, d, ceil_mode)
        for n, k, s, p, d in zip(sizes, kernel, strides, pads, dilations, strict=True)
    ]
    if any(n <= 0 for n in outputs):
        raise InvalidArgumentError(
            f"{name}: Given input size: {list(x.shape[1:])}. Calculated output size: "
            f"{[x.shape[1], *outputs]}. Output size is too small"
        )
    ends = [
        max(p, (o - 1) * s + d * (k - 1) + 1 - n - p)
        for n, o, k, s, p, d in zip(sizes, outputs, kernel, strides, pads, dilations, strict=True)
    ]
    return kernel, Geometry(strides, pads + tuple(ends), dilations, 1), outputs


class MaxPool(Function):
    @staticmethod
    def forward(
        ctx: BackwardNode, x: Tensor, kernel: tuple[int, ...], geometry: Geometry, return_indices: bool
    ) -> Tensor | tuple[Tensor, Tensor]:
        attrs = geometry.attrs()
        del attrs["group"]
        values, flat = run("MaxPool", [x], outputs=2, kernel_shape=list(kernel), **attrs)
        ctx.save_for_backward(flat)
        ctx.shape = x.shape
        ctx.disjoint = all(
            stride >= dilation * (size - 1) + 1
            for size, stride, dilation in zip(kernel, geometry.stride, geometry.dilation, strict=True)
        )
        if not return_indices:
            return values
        plane = math.prod(x.shape[2:])
        first = np.arange(math.prod(x.shape[:2]), dtype=np.int64).reshape(*x.shape[:2], *[1] * (x.ndim - 2))
        return values, run("Sub", [flat, constant(first * plane, flat, DEFAULT_INT)])

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor, *_: Tensor | None) -> tuple[Tensor, None, None, None]:
        """Each output's gradient at the input element it took (MaxPool's indices count over the
        whole tensor). Where no two windows share an element no index repeats, and the gradients
        are placed rather than added (the same values, without adding each to a zero)."""
        (flat,) = ctx.saved_tensors
        base = zeros(math.prod(ctx.shape), dtype=grad.dtype, device=grad.device)
        place = Scatter if ctx.disjoint else ScatterAdd
        spread = place.apply(base, 0, reshape(flat, [-1]), reshape(grad, [-1]))
        return reshape(spread, list(ctx.shape)), None, None, None


def _max_pool(
    rank: int,
    input: Tensor,
    kernel_size: Size,
    stride: Size | None,
    padding: Size,
    dilation: Size,
    ceil_mode: bool,
    return_indices: bool,
) -> Tensor | tuple[Tensor, Tensor]:
    name = f"max_pool{rank}d"
    x, unbatched = with_batch(input, rank, name)
    kernel, geometry, _ = _geometry(name, x, rank, kernel_size, stride, padding, dilation, ceil_mode)
    if not return_indices:
        values = MaxPool.apply(x, kernel, geometry, False)
        return squeeze(values, 0) if unbatched else values
    values, indices = MaxPool.apply(x, kernel, geometry, True)
    if unbatched:
        values, indices = squeeze(values, 0), squeeze(indices, 0)
    return values, indices


@overload
def max_pool1d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    dilation: Size = 1,
    ceil_mode: bool = False,
    return_indices: Literal[False] = False,
) -> Tensor: ...
@overload
def max_pool1d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    dilation: Size = 1,
    ceil_mode: bool = False,
    *,
    return_indices: Literal[True],
) -> tuple[Tensor, Tensor]: ...
@overload
def max_pool1d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    dilation: Size = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]: ...
def max_pool1d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    dilation: Size = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """The largest value of each window of ``(N, C, L)``; with ``return_indices`` also where it
    lies in its ``(n, c)`` plane. The gradient goes to that place (first of ties)."""
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


@overload
def max_pool2d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    dilation: Size = 1,
    ceil_mode: bool = False,
    return_indices: Literal[False] = False,
) -> Tensor: ...
@overload
def max_pool2d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    dilation: Size = 1,
    ceil_mode: bool = False,
    *,
    return_indices: Literal[True],
) -> tuple[Tensor, Tensor]: ...
@overload
def max_pool2d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    dilation: Size = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]: ...
def max_pool2d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    dilation: Size = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """The largest value of each window of ``(N, C, H, W)`` (see ``max_pool1d``)."""
    return _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


@overload
def max_pool3d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    dilation: Size = 1,
    ceil_mode: bool = False,
    return_indices: Literal[False] = False,
) -> Tensor: ...
@overload
def max_pool3d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    dilation: Size = 1,
    ceil_mode: bool = False,
    *,
    return_indices: Literal[True],
) -> tuple[Tensor, Tensor]: ...
@overload
def max_pool3d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    dilation: Size = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]: ...
def max_pool3d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    dilation: Size = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """The largest value of each window of ``(N, C, D, H, W)`` (see ``max_pool1d``)."""
    return _max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _divisors(
    sizes: Sequence[int],
    outputs: Sequence[int],
    kernel: Sequence[int],
    geometry: Geometry,
    count_include_pad: bool,
) -> np.ndarray:
    """torch's divisor of every window: its size within the padded input, or within the input."""
    total: np.ndarray = np.ones((), np.int64)
    for d, (n, o, k) in enumerate(zip(sizes, outputs, kernel, strict=True)):
        pad = geometry.pads[d]
        starts = np.arange(o) * geometry.stride[d] - pad
        ends = np.minimum(starts + k, n + pad)
        if not count_include_pad:
            starts, ends = np.maximum(starts, 0), np.minimum(ends, n)
        total = total[..., None] * (ends - starts)
    return total


def _avg_pool(
    rank: int,
    input: Tensor,
    kernel_size: Size,
    stride: Size | None,
    padding: Size,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
) -> Tensor:
    name = f"avg_pool{rank}d"
    x, unbatched = with_batch(input, rank, name)
    kernel, geometry, outputs = _geometry(name, x, rank, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and divisor_override <= 0:
        raise InvalidArgumentError("divisor must be not zero")
    planes = reshape(x, [-1, 1, *x.shape[2:]])
    ones = constant(np.ones((1, 1, *kernel)), x)
    sums = reshape(Convolution.apply(planes, ones, None, geometry), [*x.shape[:2], *outputs])
    if divisor_override is not None:
        out = sums / divisor_override
    else:
        out = sums / constant(_divisors(x.shape[2:], outputs, kernel, geometry, count_include_pad), x)
    return squeeze(out, 0) if unbatched else out


def avg_pool1d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """The mean of each window of ``(N, C, L)``, padding counted or not as torch counts it."""
    return _avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """The mean of each window of ``(N, C, H, W)`` (or its sum over ``divisor_override``)."""
    return _avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def avg_pool3d(
    input: Tensor,
    kernel_size: Size,
    stride: Size | None = None,
    padding: Size = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """The mean of each window of ``(N, C, D, H, W)`` (or its sum over ``divisor_override``)."""
    return _avg_pool(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def _averaging(size: int, out: int) -> np.ndarray:
    """The ``(out, size)`` matrix that averages torch's adaptive windows, row ``i`` over
    ``[floor(i * size / out), ceil((i + 1) * size / out))``."""
    matrix = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -(-((i + 1) * size) // out)
        matrix[i, start:end] = 1 / (end - start)
    return matrix


def _adaptive_avg_pool(rank: int, input: Tensor, output_size: int | Sequence[int | None] | None) -> Tensor:
    x, unbatched = with_batch(input, rank, f"adaptive_avg_pool{rank}d")
    wanted = (
        [output_size] * rank if output_size is None or isinstance(output_size, int) else list(output_size)
    )
    if len(wanted) != rank:
        raise InvalidArgumentError(f"adaptive_avg_pool{rank}d: output_size must be {rank}")
    for d, out in enumerate(wanted):
        axis = x.ndim - rank + d
        size = x.shape[axis]
        out = size if out is None else out
        if out != size:
            x = transpose(matmul(transpose(x, axis, -1), constant(_averaging(size, out).T, x)), axis, -1)
    return squeeze(x, 0) if unbatched else x


def adaptive_avg_pool1d(input: Tensor, output_size: int | Sequence[int]) -> Tensor:
    """The mean over ``output_size`` windows covering ``(N, C, L)`` as evenly as torch's."""
    return _adaptive_avg_pool(1, input, output_size)


def adaptive_avg_pool2d(input: Tensor, output_size: int | Sequence[int | None] | None) -> Tensor:
    """The mean over an ``output_size`` grid of windows of ``(N, C, H, W)`` (None keeps a size)."""
    return _adaptive_avg_pool(2, input, output_size)


def adaptive_avg_pool3d(input: Tensor, output_size: int | Sequence[int | None] | None) -> Tensor:
    """The mean over an ``output_size`` grid of windows of ``(N, C, D, H, W)``."""
    return _adaptive_avg_pool(3, input, output_size)
