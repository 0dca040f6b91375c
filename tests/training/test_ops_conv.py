"""Convolutions, transposed convolutions and pooling against PyTorch: values and the gradients
of input, weight and bias, over 1-3 spatial dimensions, strides, padding ("same" too),
dilation, groups, ceil mode, ties in max pooling and second-order gradients."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
import spawnml.nn.functional as F

from .torch_parity import check, torch

rng = np.random.default_rng(3)
TF = torch.nn.functional
#: Sums of a few dozen float32 products, accumulated in different orders.
CONV_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def functional(name: str, **kwargs):
    def call(m, *args):
        return getattr(F if m is spawnml else TF, name)(*args, **kwargs)

    return call


CONVS = [
    (1, {}, (2, 4, 11), (6, 4, 3)),
    (1, {"stride": 2, "padding": 2, "dilation": 2, "groups": 2}, (2, 4, 13), (6, 2, 3)),
    (1, {"padding": "same"}, (1, 3, 8), (2, 3, 4)),
    (2, {}, (2, 3, 7, 6), (4, 3, 3, 3)),
    (2, {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2)}, (2, 3, 9, 8), (5, 3, 3, 2)),
    (2, {"groups": 3, "stride": 3}, (2, 6, 10, 11), (9, 2, 2, 3)),
    (2, {"padding": "same", "dilation": 2}, (1, 2, 7, 8), (3, 2, 4, 3)),
    (2, {"padding": "valid"}, (3, 5, 5), (2, 3, 3, 3)),  # unbatched
    (3, {"stride": 2, "padding": 1}, (1, 2, 5, 6, 7), (3, 2, 3, 3, 2)),
    (3, {"groups": 2, "dilation": (1, 2, 1)}, (2, 4, 4, 6, 3), (4, 2, 2, 2, 2)),
]


@pytest.mark.parametrize(("rank", "kwargs", "x", "w"), CONVS)
def test_convolution(rank, kwargs, x, w):
    check(functional(f"conv{rank}d", **kwargs), [f32(*x), f32(*w), f32(w[0])], **CONV_TOLERANCE)
    check(functional(f"conv{rank}d", **kwargs), [f32(*x), f32(*w)], **CONV_TOLERANCE)


TRANSPOSED = [
    (1, {"stride": 2, "padding": 1, "output_padding": 1}, (2, 4, 7), (4, 3, 3)),
    (2, {}, (2, 3, 5, 4), (3, 4, 3, 3)),
    (
        2,
        {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2), "groups": 2},
        (2, 4, 5, 4),
        (4, 3, 3, 3),
    ),
    (2, {"stride": 2, "dilation": 2, "output_padding": 1}, (1, 2, 4, 5), (2, 3, 2, 3)),
    (3, {"stride": 2, "padding": 1}, (1, 2, 3, 4, 3), (2, 2, 3, 3, 2)),
]


@pytest.mark.parametrize(("rank", "kwargs", "x", "w"), TRANSPOSED)
def test_transposed_convolution(rank, kwargs, x, w):
    groups = kwargs.get("groups", 1)
    check(
        functional(f"conv_transpose{rank}d", **kwargs),
        [f32(*x), f32(*w), f32(w[1] * groups)],
        **CONV_TOLERANCE,
    )


def test_convolution_second_order_gradients():
    arrays = [f32(2, 2, 6, 5), f32(3, 2, 3, 2)]
    ours = [spawnml.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    for lib, (x, w) in ((F, ours), (TF, theirs)):
        out = lib.conv2d(x, w, stride=2, padding=1)
        (out * out).sum().backward(create_graph=True)
        gx, x.grad, w.grad = x.grad, None, None
        (gx * gx).sum().backward()
    for mine, reference in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(mine.grad.numpy(), reference.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_convolution_errors_match_torch():
    x = spawnml.zeros(1, 4, 5, 5)
    with pytest.raises(spawnml.InvalidArgumentError, match=r"expected input.* to have 3 channels, but got 4"):
        F.conv2d(x, spawnml.zeros(2, 3, 3, 3))
    with pytest.raises(spawnml.InvalidArgumentError, match="not supported for strided convolutions"):
        F.conv2d(x, spawnml.zeros(2, 4, 3, 3), stride=2, padding="same")
    with pytest.raises(spawnml.InvalidArgumentError, match="Expected 3D \\(unbatched\\) or 4D"):
        F.conv2d(spawnml.zeros(4, 5), spawnml.zeros(2, 4, 3, 3))


POOLS = [
    (1, {"kernel_size": 3}, (2, 3, 10)),
    (1, {"kernel_size": 2, "stride": 1, "padding": 1, "ceil_mode": True}, (2, 2, 7)),
    (2, {"kernel_size": 2}, (2, 3, 8, 6)),
    (2, {"kernel_size": 3, "stride": 2, "padding": 1}, (2, 2, 9, 7)),
    (2, {"kernel_size": (3, 2), "stride": (2, 3), "ceil_mode": True}, (1, 2, 8, 9)),
    (2, {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, (3, 6, 6)),  # unbatched
    (3, {"kernel_size": 2, "stride": (1, 2, 2)}, (1, 2, 4, 5, 6)),
]


@pytest.mark.parametrize(("rank", "kwargs", "x"), POOLS)
def test_max_pool_with_indices(rank, kwargs, x):
    check(functional(f"max_pool{rank}d", **kwargs), [f32(*x)])
    check(lambda m, t: functional(f"max_pool{rank}d", return_indices=True, **kwargs)(m, t)[1], [f32(*x)])


def test_max_pool_dilation_and_overlapping_windows_with_ties():
    check(functional("max_pool2d", kernel_size=3, stride=1, dilation=2), [f32(2, 2, 9, 8)])
    tied = np.round(f32(1, 2, 6, 6))  # many equal maxima; overlapping windows share elements
    check(functional("max_pool2d", kernel_size=3, stride=1, padding=1), [tied])
    check(
        lambda m, t: functional("max_pool2d", kernel_size=2, stride=1, return_indices=True)(m, t)[1], [tied]
    )


@pytest.mark.parametrize(("rank", "kwargs", "x"), POOLS)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool(rank, kwargs, x, count_include_pad):
    kwargs = {k: v for k, v in kwargs.items() if k != "dilation"}
    check(functional(f"avg_pool{rank}d", count_include_pad=count_include_pad, **kwargs), [f32(*x)])


def test_avg_pool_divisor_override():
    check(functional("avg_pool2d", kernel_size=3, padding=1, divisor_override=4), [f32(2, 3, 7, 7)])


@pytest.mark.parametrize(
    ("rank", "size", "x"),
    [
        (2, 1, (2, 3, 7, 5)),
        (2, (3, 2), (2, 3, 7, 5)),
        (2, (None, 4), (1, 2, 6, 9)),
        (1, 3, (2, 3, 10)),
        (3, 2, (1, 2, 5, 4, 3)),
    ],
)
def test_adaptive_avg_pool(rank, size, x):
    check(functional(f"adaptive_avg_pool{rank}d", output_size=size), [f32(*x)])


def test_pooling_of_infinities_and_empty_batches():
    special = np.array([[[[np.inf, 1.0], [-np.inf, 2.0]], [[-np.inf, -np.inf], [0.0, 0.0]]]], np.float32)
    check(functional("max_pool2d", kernel_size=2), [special])
    check(functional("avg_pool2d", kernel_size=2), [special])
    check(functional("max_pool2d", kernel_size=2), [np.zeros((0, 2, 4, 4), np.float32)])
    check(functional("conv2d", padding=1), [np.zeros((0, 2, 4, 4), np.float32), f32(3, 2, 2, 2)])
    check(functional("conv_transpose2d", stride=2), [np.zeros((0, 2, 3, 3), np.float32), f32(2, 3, 2, 2)])
