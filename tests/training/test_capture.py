"""Captured training steps (``spawnml.autograd.capture_step``): a replay gives the eager step's
bits, on every backend, and what cannot be replayed is refused at capture.

Two copies of a model start from the same weights; one trains eagerly, the other through a
captured step, on the same batches. Losses, parameters, gradients and optimizer state must be
equal to the bit; the replayed run's losses must also match torch's (LOSS_RTOL, as the eager
run's do in test_digits.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
import spawnml.nn as nn
import spawnml.nn.functional as F
from spawnml.autograd import CaptureError, capture_step
from spawnml.optim import SGD, Adam, AdamW, RMSprop
from spawnml.optim.lr_scheduler import StepLR

from .devices import DEVICES, device_or_skip
from .test_digits import LOSS_RTOL, build
from .torch_parity import torch

SHAPES = {"mlp": (64,), "cnn": (1, 8, 8)}
OPTIMIZERS = {
    "adam": lambda params: Adam(params, lr=0.01, amsgrad=True),
    "adamw": lambda params: AdamW(params, lr=0.01, weight_decay=0.1),
    "sgd": lambda params: SGD(params, lr=0.1, momentum=0.9, nesterov=True),
    "rmsprop": lambda params: RMSprop(params, lr=0.01, momentum=0.5, centered=True),
}
rng = np.random.default_rng(3)


def _batches(kind: str, count: int, size: int = 16) -> list[tuple[np.ndarray, np.ndarray]]:
    return [
        (rng.random((size, *SHAPES[kind]), dtype=np.float32), rng.integers(0, 10, size)) for _ in range(count)
    ]


def _trainer(model, optimizer, scheduler=None):
    def step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        return loss

    return step


def _pair(kind: str, device: str, optimizer: str = "adam"):
    """Two models with the same initial weights, each with its optimizer and a StepLR schedule."""
    spawnml.manual_seed(0)
    models = [build(nn, kind) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    runs = []
    for model in models:
        model.to(device)
        opt = OPTIMIZERS[optimizer](model.parameters())
        runs.append((model, opt, _trainer(model, opt, StepLR(opt, step_size=2, gamma=0.5))))
    return runs


def _bits(model, opt) -> list[np.ndarray]:
    arrays = []
    for p in model.parameters():
        arrays += [p.detach().numpy(), p.grad.numpy()]
        arrays += [v.numpy() for v in opt.state[p].values() if isinstance(v, spawnml.Tensor)]
    return arrays


def _assert_same_bits(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for ours, theirs in zip(got, want, strict=True):
        ours, theirs = np.atleast_1d(ours), np.atleast_1d(theirs)
        assert ours.dtype == theirs.dtype and np.array_equal(ours.view(np.uint8), theirs.view(np.uint8))


def _on(device: str, x: np.ndarray, y: np.ndarray):
    return spawnml.tensor(x, device=device), spawnml.tensor(y, device=device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_replay_gives_the_eager_bits(kind, device):
    device = device_or_skip(device)
    (eager_model, eager_opt, eager), (model, opt, step) = _pair(kind, device)
    captured = capture_step(step)
    for x, y in _batches(kind, 5):
        want = eager(*_on(device, x, y)).item()
        got = captured(*_on(device, x, y))
        assert got.item() == want
    assert captured.plans == 1 and got.grad_fn is None and not got.requires_grad
    _assert_same_bits(_bits(model, opt), _bits(eager_model, eager_opt))
    assert opt.param_groups[0]["lr"] == eager_opt.param_groups[0]["lr"] == 0.0025


@pytest.mark.parametrize("optimizer", ["adamw", "sgd", "rmsprop"])
def test_each_optimizer_replays_its_state(optimizer):
    (eager_model, eager_opt, eager), (model, opt, step) = _pair("mlp", "cpu", optimizer)
    captured = capture_step(step, warmup=2)
    for x, y in _batches("mlp", 5):
        assert captured(*_on("cpu", x, y)).item() == eager(*_on("cpu", x, y)).item()
    _assert_same_bits(_bits(model, opt), _bits(eager_model, eager_opt))
    assert opt.state_dict()["state"][0].get("step") == eager_opt.state_dict()["state"][0].get("step")


@pytest.mark.parametrize("device", DEVICES)
def test_replayed_losses_match_torch(device):
    device = device_or_skip(device)
    torch.manual_seed(0)
    reference = build(torch.nn, "mlp")
    model = build(nn, "mlp")
    model.load_state_dict({k: v.numpy() for k, v in reference.state_dict().items()})
    model.to(device)
    step = capture_step(_trainer(model, Adam(model.parameters(), lr=0.02)))
    theirs = torch.optim.Adam(reference.parameters(), lr=0.02)
    got, want = [], []
    for x, y in _batches("mlp", 10, size=128):
        got.append(step(*_on(device, x, y)).item())
        theirs.zero_grad()
        loss = torch.nn.functional.cross_entropy(reference(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        theirs.step()
        want.append(loss.item())
    np.testing.assert_allclose(got, want, rtol=LOSS_RTOL[device])


def test_dropout_masks_are_drawn_again_on_each_replay():
    def run(capture: bool) -> list[float]:
        spawnml.manual_seed(1)
        model = nn.Sequential(nn.Linear(64, 64), nn.Dropout(0.5), nn.ReLU(), nn.Linear(64, 10))
        step = _trainer(model, Adam(model.parameters(), lr=0.01))
        step = capture_step(step) if capture else step
        return [step(*_on("cpu", x, y)).item() for x, y in batches]

    batches = _batches("mlp", 4)
    losses = run(True)
    assert losses == run(False) and len(set(losses)) == len(losses)


def test_new_shapes_are_captured_again():
    (_, _, eager), (_, _, step) = _pair("mlp", "cpu")
    captured = capture_step(step, warmup=0)
    for size in (16, 8, 16, 8):
        x, y = _batches("mlp", 1, size)[0]
        assert captured(*_on("cpu", x, y)).item() == eager(*_on("cpu", x, y)).item()
    assert captured.plans == 2


def test_new_shapes_are_refused_when_asked():
    (_, _, step) = _pair("mlp", "cpu")[0]
    captured = capture_step(step, on_new_shapes="refuse")
    captured(*_on("cpu", *_batches("mlp", 1, 16)[0]))
    with pytest.raises(CaptureError, match=r"captured for inputs \(float32\[16, 64\] on cpu, int64\[16\]"):
        captured(*_on("cpu", *_batches("mlp", 1, 8)[0]))


def test_index_checks_run_on_each_replay():
    (_, _, step) = _pair("mlp", "cpu")[0]
    captured = capture_step(step, warmup=0)
    x, y = _batches("mlp", 1)[0]
    captured(*_on("cpu", x, y))
    with pytest.raises(spawnml.InvalidArgumentError, match="Target 12 is out of bounds"):
        captured(*_on("cpu", x, np.full_like(y, 12)))


def test_what_a_replay_cannot_repeat_is_refused_at_capture():
    model = build(nn, "mlp")
    opt = Adam(model.parameters())
    x, y = _on("cpu", *_batches("mlp", 1)[0])

    def reads(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss.item()

    def draws(x, y):
        return model(x + spawnml.randn(*x.shape)).sum()

    def accumulates(x, y):
        F.cross_entropy(model(x), y).backward()

    def returns_a_number(x, y):
        return 1.0

    for fn, message in [
        (reads, "reads a tensor's data on the host"),
        (draws, "draws random numbers"),
        (accumulates, "accumulates gradients"),
        (returns_a_number, "returns tensors"),
    ]:
        opt.zero_grad()
        captured = capture_step(fn)
        captured(x, y)  # the warm-up runs eagerly: an accumulated gradient is there to capture
        with pytest.raises(CaptureError, match=message):
            captured(x, y)


def test_batch_norm_running_statistics_are_updated_by_each_replay():
    def run(capture: bool) -> list[np.ndarray]:
        spawnml.manual_seed(2)
        model = nn.Sequential(
            nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(144, 10)
        )
        step = _trainer(model, SGD(model.parameters(), lr=0.1))
        step = capture_step(step) if capture else step
        for x, y in batches:
            step(*_on("cpu", x, y))
        return [b.numpy() for b in model.buffers()]

    batches = _batches("cnn", 4)
    _assert_same_bits(run(True), run(False))


def test_a_module_switched_to_eval_gets_its_own_plan():
    def run(capture: bool, on_new_shapes="recapture") -> tuple[list[float], object]:
        spawnml.manual_seed(4)
        model = nn.Sequential(nn.Linear(64, 64), nn.Dropout(0.5), nn.ReLU(), nn.Linear(64, 10))
        step = _trainer(model, SGD(model.parameters(), lr=0.1))
        step = capture_step(step, on_new_shapes=on_new_shapes) if capture else step
        losses = []
        for index, (x, y) in enumerate(batches):
            model.train(index % 3 != 2)
            losses.append(step(*_on("cpu", x, y)).item())
        return losses, step

    batches = _batches("mlp", 9)
    losses, step = run(True)
    assert losses == run(False)[0] and step.plans == 2
    with pytest.raises(CaptureError, match="modules in other modes"):
        run(True, on_new_shapes="refuse")
