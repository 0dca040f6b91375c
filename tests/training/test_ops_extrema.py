"""max / min / argmax / amax / maximum / clamp against PyTorch, ties, NaN and empty tensors included."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml

from .torch_parity import assert_close, both, check, torch

rng = np.random.default_rng(1)

TIES = np.array([[1.0, 3.0, 3.0, -2.0], [0.0, 0.0, 0.0, 0.0], [5.0, -1.0, 5.0, 5.0]], np.float32)
WITH_NAN = np.array([[1.0, np.nan, 3.0, np.nan], [-np.inf, -np.inf, 2.0, np.inf]], np.float32)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("data", [f32(3, 4, 5), TIES, WITH_NAN], ids=["random", "ties", "nan"])
def test_reductions_over_a_dimension_return_values_and_indices(name, data):
    for dim in range(-data.ndim, data.ndim):
        for keepdim in (False, True):
            check(lambda m, x, d=dim, k=keepdim: getattr(m, name)(x, d, keepdim=k).values * 1, [data])
            ours, theirs = both([data])
            assert_close(
                getattr(spawnml, name)(ours[0], dim, keepdim).indices,
                getattr(torch, name)(theirs[0], dim, keepdim).indices,
            )


@pytest.mark.parametrize("name", ["max", "min", "amax", "amin"])
@pytest.mark.parametrize(
    "data", [f32(3, 4), TIES, WITH_NAN, np.float32(2.5)], ids=["random", "ties", "nan", "scalar"]
)
def test_whole_tensor_reductions_share_the_gradient_among_ties(name, data):
    check(lambda m, x: getattr(m, name)(x), [np.asarray(data)])


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_amax_over_several_dims(name):
    check(lambda m, x: getattr(m, name)(x, (0, 2), keepdim=True), [np.round(f32(3, 4, 5))])
    check(lambda m, x: getattr(m, name)(x, -1), [TIES])


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("data", [f32(3, 4, 5), TIES, WITH_NAN], ids=["random", "ties", "nan"])
def test_argmax_picks_the_first_extreme(name, data):
    ours, theirs = both([data])
    fn_ours, fn_torch = getattr(spawnml, name), getattr(torch, name)
    assert_close(fn_ours(ours[0]), fn_torch(theirs[0]))
    for dim in range(data.ndim):
        for keepdim in (False, True):
            assert_close(fn_ours(ours[0], dim, keepdim), fn_torch(theirs[0], dim, keepdim))
    assert_close(getattr(ours[0].detach(), name)(), getattr(theirs[0].detach(), name)())


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_elementwise_extremes_split_the_gradient_at_ties(name):
    a = np.array([1.0, 2.0, 3.0, np.nan, 0.0, -1.0], np.float32)
    b = np.array([1.0, 5.0, -3.0, 1.0, 0.0, np.nan], np.float32)
    check(lambda m, x, y: getattr(m, name)(x, y), [a, b])
    check(lambda m, x, y: getattr(m, name)(x, y), [np.round(f32(3, 1, 4)), np.round(f32(5, 4))])
    check(lambda m, x, y: getattr(m, name[:3])(x, y), [f32(2, 3), f32(2, 3)])


SPECIAL = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, np.nan, np.inf, -np.inf], np.float32)


@pytest.mark.parametrize(
    "bounds", [(-1.0, 1.0), (None, 0.5), (-0.5, None), (1.0, -1.0)], ids=["both", "max", "min", "crossed"]
)
def test_clamp_with_numbers_passes_the_gradient_at_the_bounds(bounds):
    low, high = bounds
    check(lambda m, x: m.clamp(x, low, high), [SPECIAL])
    check(lambda m, x: x.clip(min=low, max=high), [f32(4, 5)])


def test_clamp_with_tensors_gives_the_bounds_their_gradients():
    x, low, high = f32(4, 5), f32(5) - 0.5, f32(4, 1) + 0.5
    check(lambda m, a, b, c: m.clamp(a, b, c), [x, low, high])
    check(lambda m, a, b: m.clamp(a, min=b), [x, low])
    check(lambda m, a, c: m.clamp(a, max=c), [x, high])
    check(lambda m, a, b, c: m.clamp(a, b, c), [SPECIAL, np.zeros(10, np.float32), SPECIAL[::-1].copy()])


def test_clamp_in_place_and_integer_inputs():
    x = spawnml.tensor([-3, 0, 4])
    x.clamp_(-1, 2)
    assert x.tolist() == [-1, 0, 2]
    assert_close(spawnml.clamp(spawnml.tensor([1, 5]), max=2.5), torch.clamp(torch.tensor([1, 5]), max=2.5))


def test_empty_tensors():
    empty = np.zeros((0, 3), np.float32)
    check(lambda m, x: m.max(x, 1).values, [empty])
    check(lambda m, x: m.amax(x, 1), [empty])
    check(lambda m, x, y: m.maximum(x, y), [empty, empty])
    check(lambda m, x: m.clamp(x, 0, 1), [empty])
    with pytest.raises(spawnml.InvalidArgumentError, match="Expected reduction dim 0 to have non-zero size"):
        spawnml.max(spawnml.tensor(empty), 0)
    with pytest.raises(spawnml.InvalidArgumentError, match="Expected reduction dim to be specified"):
        spawnml.max(spawnml.tensor(empty))
    with pytest.raises(spawnml.InvalidArgumentError, match="At least one of 'min' or 'max'"):
        spawnml.clamp(spawnml.tensor(empty))
