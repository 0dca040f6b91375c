"""spawnml.nn layers against torch.nn: the same layer with torch's weights gives torch's output,
input gradient and parameter gradients on every backend, within torch_parity's RTOL of each value
plus RTOL of the largest magnitude (float32 sums in another order, as GPU reductions take), and
BatchNorm moves its running statistics as torch's does, in training and in evaluation mode."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
import spawnml.nn as nn

from .devices import DEVICES, device_or_skip
from .torch_parity import ATOL, RTOL, assert_close, torch

tnn = torch.nn
rng = np.random.default_rng(5)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _close(ours, theirs) -> None:
    scale = float(np.abs(theirs.detach().numpy()).max(initial=1.0))
    assert_close(ours, theirs, RTOL, max(ATOL, RTOL * scale))


def _pair(make, device: str = "cpu"):
    theirs = make(tnn)
    ours = make(nn)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    return ours.to(device), theirs


def _check(make, x: np.ndarray, train: bool = True, device: str = "cpu"):
    ours, theirs = _pair(make, device)
    ours.train(train)
    theirs.train(train)
    mine = spawnml.tensor(x, device=device, requires_grad=x.dtype.kind == "f")
    reference = torch.tensor(x, requires_grad=x.dtype.kind == "f")
    out, expected = ours(mine), theirs(reference)
    _close(out, expected)
    upstream = rng.standard_normal(tuple(expected.shape)).astype(np.float32)
    out.backward(spawnml.tensor(upstream, device=device))
    expected.backward(torch.tensor(upstream))
    if reference.grad is not None:
        _close(mine.grad, reference.grad)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        assert p.grad is not None, name
        _close(p.grad, q.grad)
    for (name, b), (_, c) in zip(ours.named_buffers(), theirs.named_buffers(), strict=True):
        np.testing.assert_allclose(b.numpy(), c.numpy(), RTOL, ATOL, err_msg=name)


LAYERS = [
    ("Linear", lambda lib: lib.Linear(5, 3), (4, 5)),
    ("Linear-3d-nobias", lambda lib: lib.Linear(5, 3, bias=False), (2, 4, 5)),
    ("Conv1d", lambda lib: lib.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
    ("Conv2d", lambda lib: lib.Conv2d(4, 6, 3, padding="same", groups=2), (2, 4, 7, 6)),
    ("LayerNorm", lambda lib: lib.LayerNorm([3, 4]), (2, 5, 3, 4)),
    ("GroupNorm", lambda lib: lib.GroupNorm(2, 6), (3, 6, 4)),
    ("MaxPool2d", lambda lib: lib.MaxPool2d(2), (2, 3, 6, 6)),
    ("AvgPool2d", lambda lib: lib.AvgPool2d(3, stride=2, padding=1), (2, 3, 7, 7)),
    ("AdaptiveAvgPool2d", lambda lib: lib.AdaptiveAvgPool2d((2, 3)), (2, 3, 7, 8)),
    ("Flatten", lambda lib: lib.Flatten(), (2, 3, 4)),
    ("ReLU", lambda lib: lib.ReLU(), (3, 4)),
    ("GELU", lambda lib: lib.GELU(), (3, 4)),
    ("GELU-tanh", lambda lib: lib.GELU("tanh"), (3, 4)),
    ("Tanh", lambda lib: lib.Tanh(), (3, 4)),
    ("Sigmoid", lambda lib: lib.Sigmoid(), (3, 4)),
    ("SiLU", lambda lib: lib.SiLU(), (3, 4)),
    ("LeakyReLU", lambda lib: lib.LeakyReLU(0.2), (3, 4)),
    ("Softmax", lambda lib: lib.Softmax(dim=1), (3, 4)),
    ("LogSoftmax", lambda lib: lib.LogSoftmax(dim=-1), (3, 4)),
    (
        "MLP",
        lambda lib: lib.Sequential(
            lib.Linear(6, 8), lib.GELU(), lib.Dropout(0.3), lib.LayerNorm(8), lib.Linear(8, 2)
        ),
        (5, 6),
    ),
]


@pytest.mark.parametrize(("make", "shape"), [(m, s) for _, m, s in LAYERS], ids=[n for n, _, _ in LAYERS])
@pytest.mark.parametrize("device", DEVICES)
def test_layer_matches_torch(make, shape, device):
    _check(make, f32(*shape), train=False, device=device_or_skip(device))


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize(
    ("cls", "shape"), [("BatchNorm1d", (8, 3)), ("BatchNorm1d", (4, 3, 5)), ("BatchNorm2d", (4, 3, 2, 5))]
)
@pytest.mark.parametrize("device", DEVICES)
def test_batch_norm_train_then_eval(cls, shape, momentum, device):
    device = device_or_skip(device)
    ours, theirs = _pair(lambda lib: getattr(lib, cls)(3, momentum=momentum), device)
    for _ in range(3):  # running statistics move as torch's, step after step
        x = f32(*shape)
        _close(ours(spawnml.tensor(x, device=device)), theirs(torch.tensor(x)))
        for (name, b), (_, c) in zip(ours.named_buffers(), theirs.named_buffers(), strict=True):
            np.testing.assert_allclose(b.numpy(), c.numpy(), RTOL, ATOL, err_msg=name)
    _check(lambda lib: getattr(lib, cls)(3, momentum=momentum), f32(*shape), train=True, device=device)
    _check(lambda lib: getattr(lib, cls)(3, momentum=momentum), f32(*shape), train=False, device=device)


def test_embedding_matches_torch():
    ours, theirs = _pair(lambda lib: lib.Embedding(7, 3, padding_idx=2))
    index = np.array([[0, 2, 6], [2, 1, 1]])
    out, expected = ours(spawnml.tensor(index)), theirs(torch.tensor(index))
    assert_close(out, expected)
    upstream = f32(2, 3, 3)
    out.backward(spawnml.tensor(upstream))
    expected.backward(torch.tensor(upstream))
    assert_close(ours.weight.grad, theirs.weight.grad)


def test_dropout_trains_and_evaluates_as_torch():
    layer = nn.Dropout(0.25)
    x = spawnml.ones(200, 500)
    kept = layer(x).numpy()
    assert set(np.unique(kept)) <= {0.0, np.float32(1 / 0.75)}
    share = (kept == 0).mean()  # 1e5 Bernoulli(0.25) draws: standard error 0.0014
    assert abs(share - 0.25) < 0.007
    layer.eval()
    np.testing.assert_array_equal(layer(x).numpy(), x.numpy())


LOSSES = [
    ("CrossEntropyLoss", lambda lib: lib.CrossEntropyLoss(label_smoothing=0.1), (6, 4), "class"),
    (
        "CrossEntropyLoss-ignore",
        lambda lib: lib.CrossEntropyLoss(ignore_index=1, reduction="sum"),
        (6, 4),
        "class",
    ),
    ("NLLLoss", lambda lib: lib.NLLLoss(), (6, 4), "class"),
    ("MSELoss", lambda lib: lib.MSELoss(), (6, 4), "same"),
    ("L1Loss", lambda lib: lib.L1Loss(reduction="sum"), (6, 4), "same"),
    ("HuberLoss", lambda lib: lib.HuberLoss(delta=0.5), (6, 4), "same"),
    ("SmoothL1Loss", lambda lib: lib.SmoothL1Loss(beta=0.5), (6, 4), "same"),
    ("BCEWithLogitsLoss", lambda lib: lib.BCEWithLogitsLoss(), (6, 4), "probability"),
    ("KLDivLoss", lambda lib: lib.KLDivLoss(reduction="batchmean"), (6, 4), "probability"),
]


@pytest.mark.parametrize(("make", "shape", "target"), [c[1:] for c in LOSSES], ids=[c[0] for c in LOSSES])
@pytest.mark.parametrize("device", DEVICES)
def test_loss_matches_torch(make, shape, target, device):
    device = device_or_skip(device)
    x = f32(*shape)
    if target == "class":
        y = rng.integers(0, shape[1], shape[0])
    elif target == "probability":
        y = rng.random(shape).astype(np.float32)
    else:
        y = f32(*shape)
    ours, theirs = make(nn), make(tnn)
    mine, reference = (
        spawnml.tensor(x, device=device, requires_grad=True),
        torch.tensor(x, requires_grad=True),
    )
    out, expected = ours(mine, spawnml.tensor(y, device=device)), theirs(reference, torch.tensor(y))
    _close(out, expected)
    out.backward()
    expected.backward()
    _close(mine.grad, reference.grad)
