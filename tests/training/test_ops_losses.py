"""softmax, log_softmax and the losses against PyTorch, with weights, ignore_index, label
smoothing, every reduction, extreme logits and empty batches."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
import spawnml.nn.functional as F

from .torch_parity import check, torch

rng = np.random.default_rng(2)
TF = torch.nn.functional


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def classes(shape: tuple[int, ...], count: int) -> np.ndarray:
    return rng.integers(0, count, shape).astype(np.int64)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmaxes(name, dim):
    check(lambda m, x: getattr(m, name)(x, dim), [f32(3, 4, 5)])
    check(lambda m, x: getattr(x, name)(dim), [f32(2, 3, 4)])


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmaxes_at_extreme_logits(name):
    logits = np.array(
        [[1e30, 0.0, -1e30], [-np.inf, 0.0, 1.0], [np.nan, 1.0, 2.0], [0.0, 0.0, 0.0]], np.float32
    )
    check(lambda m, x: getattr(F, name)(x, 1) if m is spawnml else getattr(TF, name)(x, 1), [logits])
    check(lambda m, x: getattr(m, name)(x, 0), [np.float32(3.0)])
    check(lambda m, x: getattr(m, name)(x, 1), [np.zeros((0, 4), np.float32)])


def test_softmax_with_dtype_and_second_order_gradient():
    check(lambda m, x: m.softmax(x, -1, dtype=m.float64), [f32(2, 5)])
    x = spawnml.tensor(f32(6), requires_grad=True)
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    for lib, t in ((spawnml, x), (torch, tx)):
        (lib.log_softmax(t, 0) * lib.softmax(t, 0)).sum().backward(create_graph=True)
        first, t.grad = t.grad, None
        (first * first).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)


def functional(name: str, **kwargs):
    """``F.name`` on SpawnML's side and on torch's, applied to the same arguments."""

    def call(m, *args, **more):
        return getattr(F if m is spawnml else TF, name)(*args, **kwargs, **more)

    return call


REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(5, 4), (4,), (3, 4, 2, 3)], ids=["NC", "C", "NCdd"])
def test_nll_loss_and_cross_entropy(reduction, shape):
    target_shape = () if len(shape) == 1 else (shape[0], *shape[2:])
    target = classes(target_shape, shape[1 if len(shape) > 1 else 0])
    for name in ("nll_loss", "cross_entropy"):
        check(functional(name, reduction=reduction), [f32(*shape), target])
        check(functional(name, reduction=reduction, ignore_index=1), [f32(*shape), target])
        weight = np.abs(f32(shape[1 if len(shape) > 1 else 0])) + 0.1
        weighted = functional(name, reduction=reduction)
        check(lambda m, x, f=weighted, w=weight: f(m, x, m.tensor(target), m.tensor(w)), [f32(*shape)])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_with_label_smoothing_and_ignored_targets(reduction, weighted):
    target = np.array([0, 2, -100, 3, 2, 1], np.int64)
    weight = np.abs(f32(4)) + 0.1

    def loss(m, x, t):
        w = m.tensor(weight) if weighted else None
        return functional("cross_entropy", reduction=reduction, label_smoothing=0.2)(m, x, t, w)

    check(loss, [f32(6, 4), target], atol=2e-6)
    check(
        lambda m, x, t: (F if m is spawnml else TF).cross_entropy(x, t, ignore_index=2, label_smoothing=0.3),
        [f32(6, 4), target.clip(0)],
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_with_class_probabilities(reduction):
    probabilities = np.exp(f32(5, 3, 2))
    probabilities /= probabilities.sum(1, keepdims=True)
    weight = np.abs(f32(3)) + 0.1
    check(functional("cross_entropy", reduction=reduction), [f32(5, 3, 2), probabilities])
    check(
        functional("cross_entropy", reduction=reduction, label_smoothing=0.1),
        [f32(5, 3), probabilities[..., 0]],
    )
    weighted = functional("cross_entropy", reduction=reduction)
    check(lambda m, x, p: weighted(m, x, p, m.tensor(weight)), [f32(5, 3), probabilities[..., 1].copy()])


def test_losses_where_every_target_is_ignored_or_the_batch_is_empty():
    check(functional("cross_entropy"), [f32(3, 4), np.full(3, -100, np.int64)])
    check(functional("nll_loss", reduction="sum"), [f32(3, 4), np.full(3, -100, np.int64)])
    check(functional("cross_entropy"), [np.zeros((0, 4), np.float32), np.zeros(0, np.int64)])
    check(functional("mse_loss"), [np.zeros((0, 4), np.float32), np.zeros((0, 4), np.float32)])


def test_class_target_errors_match_torch():
    logits = spawnml.zeros(3, 4)
    with pytest.raises(spawnml.InvalidArgumentError, match="Target 4 is out of bounds"):
        F.cross_entropy(logits, spawnml.tensor([0, 4, 1]))
    with pytest.raises(
        spawnml.InvalidArgumentError,
        match=r"Expected input batch_size \(3\) to match target batch_size \(2\)",
    ):
        F.nll_loss(logits, spawnml.tensor([0, 1]))
    with pytest.raises(spawnml.InvalidArgumentError, match="not a valid value for reduction"):
        F.mse_loss(logits, logits, reduction="avg")


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_pointwise_losses(name, reduction):
    check(functional(name, reduction=reduction), [f32(4, 5), f32(4, 5)])
    check(functional(name, reduction=reduction), [f32(4, 1, 5), f32(3, 5)])  # broadcast
    equal = f32(6)
    check(functional(name, reduction=reduction), [equal, equal.copy()])  # zero difference: l1's kink
    weighted = functional(name)
    check(
        lambda m, x, t, w: weighted(m, x, t, None, None, reduction, w),
        [f32(4, 5), f32(4, 5), np.abs(f32(4, 5))],
    )


def test_legacy_reduction_arguments():
    check(functional("mse_loss", size_average=False), [f32(3, 2), f32(3, 2)])
    check(functional("l1_loss", reduce=False), [f32(3, 2), f32(3, 2)])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_smooth_l1_and_huber_losses_at_and_around_the_threshold(reduction):
    target = np.zeros(9, np.float32)
    differences = np.array([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -3.0, 0.25, 1.5], np.float32)
    for beta in (1.0, 0.5, 0.0):
        check(functional("smooth_l1_loss", reduction=reduction, beta=beta), [differences, target])
    for delta in (1.0, 0.5, 2.0):
        check(functional("huber_loss", reduction=reduction, delta=delta), [differences, target])
    check(functional("smooth_l1_loss", reduction=reduction), [f32(3, 4) * 2, f32(3, 4)])
    weighted = functional("huber_loss", reduction=reduction)
    check(lambda m, x, t, w: weighted(m, x, t, weight=w), [f32(3, 4) * 2, f32(3, 4), np.abs(f32(3, 4))])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_including_certain_predictions(reduction):
    probabilities = np.array([0.0, 1.0, 0.3, 0.999, 1e-6, 0.5], np.float32)
    targets = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.25], np.float32)
    check(functional("binary_cross_entropy", reduction=reduction), [probabilities, targets])
    inside = 1 / (1 + np.exp(-f32(3, 4)))
    bce = functional("binary_cross_entropy", reduction=reduction)
    check(lambda m, x, t: bce(m, x, t, m.tensor(WEIGHT34)), [inside, rng.random((3, 4)).astype(np.float32)])
    with pytest.raises(spawnml.InvalidArgumentError, match="between 0 and 1"):
        F.binary_cross_entropy(spawnml.tensor([1.5]), spawnml.tensor([1.0]))


WEIGHT34 = np.abs(rng.standard_normal((3, 4))).astype(np.float32)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits_and_pos_weight(reduction):
    logits = np.array(
        [[0.0, 50.0, -50.0, 3.0], [-1.0, 100.0, -100.0, 0.5], [2.0, -2.0, 1e-3, -7.0]], np.float32
    )
    targets = rng.random((3, 4)).astype(np.float32)
    loss = functional("binary_cross_entropy_with_logits", reduction=reduction)
    check(loss, [logits, targets])
    check(
        lambda m, x, t: loss(m, x, t, m.tensor(WEIGHT34), pos_weight=m.tensor([1.0, 2.0, 0.5, 3.0])),
        [logits, targets],
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    log_probabilities = np.log(rng.dirichlet(np.ones(5), 4)).astype(np.float32)
    target = rng.dirichlet(np.ones(5), 4).astype(np.float32)
    target = np.log(target) if log_target else target
    check(functional("kl_div", reduction=reduction, log_target=log_target), [log_probabilities, target])


def test_kl_div_where_the_target_is_zero():
    target = np.array([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]], np.float32)
    log_probabilities = np.log(np.full((2, 3), 1 / 3, np.float32))
    check(
        lambda m, x: functional("kl_div", reduction="batchmean")(m, x, m.tensor(target)), [log_probabilities]
    )
