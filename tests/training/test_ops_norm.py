"""Normalization and dropout against PyTorch: layer, batch (training and evaluation, running
statistics updated in place) and group norm with and without affine parameters; dropout's
masks, scaling and gradients, and its seeding."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
import spawnml.nn.functional as F

from .torch_parity import assert_close, check, torch

rng = np.random.default_rng(6)
TF = torch.nn.functional
#: Means and variances of a few hundred float32 values, summed in different orders.
NORM_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def lib(m):
    return F if m is spawnml else TF


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize(("shape", "normalized"), [((4, 6), (6,)), ((2, 3, 4, 5), (4, 5)), ((3, 7), [7])])
def test_layer_norm(shape, normalized, affine):
    dims = tuple(normalized)
    arrays = [f32(*shape) * 3 + 1] + ([f32(*dims), f32(*dims)] if affine else [])
    check(lambda m, x, *wb: lib(m).layer_norm(x, normalized, *wb, eps=1e-3), arrays, **NORM_TOLERANCE)


def test_layer_norm_of_a_constant_row_and_second_order_gradient():
    check(
        lambda m, x: lib(m).layer_norm(x, (4,)),
        [np.array([[2.0, 2.0, 2.0, 2.0], [1.0, -1.0, 0.5, 3.0]], np.float32)],
        **NORM_TOLERANCE,
    )
    x = f32(3, 5)
    ours, theirs = spawnml.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for m, t in ((spawnml, ours), (torch, theirs)):
        (lib(m).layer_norm(t, (5,)) * t).sum().backward(create_graph=True)
        first, t.grad = t.grad, None
        (first * first).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 5), (2, 3, 2, 2, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_in_training_updates_running_statistics(shape, affine):
    channels = shape[1]
    start_mean, start_var = f32(channels), np.abs(f32(channels)) + 0.5
    stats = {}

    def fn(m, x, *wb):
        running_mean, running_var = m.tensor(start_mean), m.tensor(start_var)
        stats[m.__name__] = running_mean, running_var
        return lib(m).batch_norm(x, running_mean, running_var, *wb, training=True, momentum=0.3, eps=1e-4)

    arrays = [f32(*shape) * 2 + 0.5] + ([f32(channels), f32(channels)] if affine else [])
    check(fn, arrays, **NORM_TOLERANCE)
    for ours, theirs in zip(stats["spawnml"], stats["torch"], strict=True):
        assert_close(ours, theirs, **NORM_TOLERANCE)


def test_batch_norm_in_evaluation_uses_running_statistics():
    mean, var = f32(3), np.abs(f32(3)) + 0.5

    def fn(m, x, w, b):
        return lib(m).batch_norm(x, m.tensor(mean), m.tensor(var), w, b, training=False)

    check(fn, [f32(4, 3, 5), f32(3), f32(3)], **NORM_TOLERANCE)
    check(lambda m, x: lib(m).batch_norm(x, None, None, training=True), [f32(5, 2)], **NORM_TOLERANCE)


def test_batch_norm_refuses_single_values_per_channel():
    with pytest.raises(
        spawnml.InvalidArgumentError, match="Expected more than 1 value per channel when training"
    ):
        F.batch_norm(spawnml.zeros(1, 3), None, None, training=True)


@pytest.mark.parametrize(
    ("shape", "groups"), [((2, 6, 5), 3), ((2, 4, 3, 3), 2), ((3, 4), 2), ((2, 6, 2, 2), 1)]
)
def test_group_norm(shape, groups):
    channels = shape[1]
    check(
        lambda m, x, w, b: lib(m).group_norm(x, groups, w, b, eps=1e-4),
        [f32(*shape), f32(channels), f32(channels)],
        **NORM_TOLERANCE,
    )
    check(lambda m, x: lib(m).group_norm(x, groups), [f32(*shape)], **NORM_TOLERANCE)
    with pytest.raises(spawnml.InvalidArgumentError, match="divisible by num_groups"):
        F.group_norm(spawnml.zeros(2, 5, 3), 2)


def test_dropout_scales_the_kept_elements_and_passes_the_gradient_through_them():
    spawnml.manual_seed(0)
    x = spawnml.tensor(np.abs(f32(200, 50)) + 1, requires_grad=True)
    out = F.dropout(x, p=0.3)
    kept = out.detach().numpy() != 0
    assert abs(kept.mean() - 0.7) < 0.02  # 10,000 draws: 5 standard deviations are 0.023
    np.testing.assert_allclose(out.detach().numpy()[kept], x.detach().numpy()[kept] / 0.7, rtol=1e-6)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 1 / 0.7, 0), rtol=1e-6)


def test_dropout_edge_probabilities_evaluation_and_errors_match_torch():
    x = f32(4, 5)
    for p, training in ((0.0, True), (0.5, False)):
        check(lambda m, t, p=p, training=training: lib(m).dropout(t, p, training), [x])
    check(lambda m, t: lib(m).dropout(t, 1.0), [x])
    with pytest.raises(
        spawnml.InvalidArgumentError, match=r"dropout probability has to be between 0 and 1, but got 1\.5"
    ):
        F.dropout(spawnml.tensor(x), 1.5)


def test_dropout_is_reproducible_from_the_seed():
    draws = []
    for _ in range(2):
        spawnml.manual_seed(42)
        draws.append(F.dropout(spawnml.ones(64)).numpy())
    np.testing.assert_array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[0], F.dropout(spawnml.ones(64)).numpy())


def test_channel_dropout_zeroes_whole_channels():
    spawnml.manual_seed(1)
    out = F.dropout2d(spawnml.ones(4, 16, 3, 3), p=0.5).numpy()
    per_channel = out.reshape(4, 16, 9)
    assert ((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all()
    assert 0 < (per_channel == 0).all(-1).mean() < 1
    x = spawnml.ones(2, 3, 4, requires_grad=True)
    y = F.dropout1d(x, p=0.4)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())


def test_dropout_in_place():
    spawnml.manual_seed(3)
    x = spawnml.ones(10, 10)
    out = F.dropout(x, 0.5, inplace=True)
    assert out is x
    assert set(np.unique(x.numpy())) <= {0.0, 2.0}
