"""Optimizers and learning-rate schedulers against torch.optim.

Each optimizer takes several steps from the same weights with the same gradients on both sides;
the parameters and the state agree after every step within RTOL of each value plus RTOL of the
largest magnitude (float32, the same operations in the same order; OpenCL's division and square
root may be a few ulps off correctly rounded, which shows where terms cancel). Schedules agree
exactly: the same formulas on Python floats.
"""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from spawnml import optim
from spawnml.optim import lr_scheduler

from .devices import DEVICES, device_or_skip
from .torch_parity import torch

RTOL = 1e-6
STEPS = 5
SHAPES = [(4, 3), (3,), (2, 2, 5)]

CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.5, "maximize": True}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.05}),
    ("Adam", {"lr": 0.01, "amsgrad": True, "maximize": True}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.02, "weight_decay": 0.1, "amsgrad": True}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "momentum": 0.9, "weight_decay": 0.01}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5}),
    ("RMSprop", {"lr": 0.01, "centered": True, "maximize": True}),
]


def assert_close(ours, theirs) -> None:
    want = theirs.detach().numpy()
    scale = float(np.abs(want).max(initial=1.0))
    np.testing.assert_allclose(ours.detach().numpy(), want, rtol=RTOL, atol=RTOL * scale)


@pytest.fixture(params=DEVICES)
def device(request):
    return device_or_skip(request.param)


def _weights_and_grads(seed: int):
    rng = np.random.default_rng(seed)
    weights = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(STEPS)]
    return weights, grads


@pytest.mark.parametrize(("name", "options"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_steps_match_torch(name, options, device):
    weights, grads = _weights_and_grads(len(options))
    ours = [spawnml.tensor(w, device=device, requires_grad=True) for w in weights]
    theirs = [torch.tensor(w, requires_grad=True) for w in weights]
    mine, reference = getattr(optim, name)(ours, **options), getattr(torch.optim, name)(theirs, **options)
    for step_grads in grads:
        for p, t, g in zip(ours, theirs, step_grads, strict=True):
            p.grad, t.grad = spawnml.tensor(g, device=device), torch.tensor(g)
        mine.step()
        reference.step()
        for p, t in zip(ours, theirs, strict=True):
            assert_close(p, t)
    for p, t in zip(ours, theirs, strict=True):
        for key, value in reference.state[t].items():
            if key != "step":
                assert_close(mine.state[p][key], value)


def test_parameter_groups_and_skipped_parameters():
    weights, grads = _weights_and_grads(0)
    ours = [spawnml.tensor(w, requires_grad=True) for w in weights]
    theirs = [torch.tensor(w, requires_grad=True) for w in weights]
    mine = optim.SGD([{"params": ours[:2]}, {"params": ours[2:], "lr": 0.5}], lr=0.1, momentum=0.9)
    reference = torch.optim.SGD(
        [{"params": theirs[:2]}, {"params": theirs[2:], "lr": 0.5}], lr=0.1, momentum=0.9
    )
    for step, step_grads in enumerate(grads):
        for i, (p, t, g) in enumerate(zip(ours, theirs, step_grads, strict=True)):
            has_grad = (i + step) % 3 != 0  # some parameters get no gradient on some steps
            p.grad, t.grad = (spawnml.tensor(g), torch.tensor(g)) if has_grad else (None, None)
        mine.step()
        reference.step()
    for p, t in zip(ours, theirs, strict=True):
        assert_close(p, t)


def test_zero_grad():
    p = spawnml.ones(3, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    (p * p).sum().backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.numpy(), np.zeros(3, np.float32))
    opt.zero_grad()
    assert p.grad is None


def test_state_dict_resumes_exactly():
    weights, grads = _weights_and_grads(1)
    straight = [spawnml.tensor(w, requires_grad=True) for w in weights]
    opt = optim.Adam(straight, lr=0.01, amsgrad=True)
    resumed = [spawnml.tensor(w, requires_grad=True) for w in weights]
    first = optim.Adam(resumed, lr=0.01, amsgrad=True)
    for step, step_grads in enumerate(grads):
        if step == 2:
            saved = first.state_dict()
            copies = [spawnml.tensor(p.detach().numpy(), requires_grad=True) for p in resumed]
            first = optim.Adam(copies, lr=0.01, amsgrad=True)
            first.load_state_dict(saved)
            resumed = copies
        for p, q, g in zip(straight, resumed, step_grads, strict=True):
            p.grad, q.grad = spawnml.tensor(g), spawnml.tensor(g)
        opt.step()
        first.step()
    for p, q in zip(straight, resumed, strict=True):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_invalid_hyperparameters_are_refused():
    p = spawnml.ones(2, requires_grad=True)
    with pytest.raises(spawnml.InvalidArgumentError, match="Invalid learning rate: -1"):
        optim.Adam([p], lr=-1)
    with pytest.raises(spawnml.InvalidArgumentError, match="Nesterov momentum requires"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(spawnml.InvalidArgumentError, match="Invalid beta parameter at index 1"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(spawnml.InvalidArgumentError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


SCHEDULES = [
    ("StepLR", {"step_size": 3, "gamma": 0.5}),
    ("MultiStepLR", {"milestones": [2, 5, 5, 9], "gamma": 0.3}),
    ("ExponentialLR", {"gamma": 0.9}),
    ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.001}),
    ("LinearLR", {"start_factor": 0.25, "total_iters": 6}),
    ("LambdaLR", {"lr_lambda": lambda epoch: 0.95**epoch / (1 + epoch)}),
]


@pytest.mark.parametrize(("name", "options"), SCHEDULES, ids=[n for n, _ in SCHEDULES])
def test_schedules_match_torch(name, options):
    mine = optim.SGD(
        [
            {"params": [spawnml.ones(2, requires_grad=True)]},
            {"params": [spawnml.ones(1, requires_grad=True)], "lr": 0.3},
        ],
        lr=0.1,
    )
    reference = torch.optim.SGD(
        [
            {"params": [torch.ones(2, requires_grad=True)]},
            {"params": [torch.ones(1, requires_grad=True)], "lr": 0.3},
        ],
        lr=0.1,
    )
    ours = getattr(lr_scheduler, name)(mine, **options)
    theirs = getattr(torch.optim.lr_scheduler, name)(reference, **options)
    for _ in range(20):
        assert ours.get_last_lr() == theirs.get_last_lr()
        mine.step()
        reference.step()
        ours.step()
        theirs.step()


def test_reduce_on_plateau_matches_torch():
    mine = optim.SGD([spawnml.ones(2, requires_grad=True)], lr=1.0)
    reference = torch.optim.SGD([torch.ones(2, requires_grad=True)], lr=1.0)
    options = {"factor": 0.5, "patience": 2, "cooldown": 1, "min_lr": 0.05, "threshold": 0.01}
    ours = lr_scheduler.ReduceLROnPlateau(mine, **options)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(reference, **options)
    for loss in [5, 4, 4.0, 3.99, 4.1, 4, 4, 4, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]:
        ours.step(loss)
        theirs.step(loss)
        assert ours.get_last_lr() == theirs.get_last_lr()


def test_scheduler_state_dict_round_trip():
    opt = optim.SGD([spawnml.ones(2, requires_grad=True)], lr=0.1)
    first = lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    for _ in range(4):
        first.step()
    again = optim.SGD([spawnml.ones(2, requires_grad=True)], lr=0.1)
    second = lr_scheduler.CosineAnnealingLR(again, T_max=10)
    second.load_state_dict(first.state_dict())
    again.load_state_dict(opt.state_dict())
    for _ in range(5):
        first.step()
        second.step()
        assert first.get_last_lr() == second.get_last_lr()


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("SGD", {"max_lr": 0.5, "total_steps": 20}),
        ("Adam", {"max_lr": [0.1, 0.3], "epochs": 4, "steps_per_epoch": 5, "anneal_strategy": "linear"}),
        ("SGD", {"max_lr": 0.5, "total_steps": 20, "three_phase": True, "pct_start": 0.25}),
    ],
)
def test_one_cycle_matches_torch(name, options):
    def groups(lib):
        return [{"params": [lib.ones(2, requires_grad=True)]}, {"params": [lib.ones(1, requires_grad=True)]}]

    extra = {"momentum": 0.9} if name == "SGD" else {}
    mine = getattr(optim, name)(groups(spawnml), lr=0.1, **extra)
    reference = getattr(torch.optim, name)(groups(torch), lr=0.1, **extra)
    ours = lr_scheduler.OneCycleLR(mine, **options)
    theirs = torch.optim.lr_scheduler.OneCycleLR(reference, **options)
    key = "betas" if name == "Adam" else "momentum"
    for _ in range(19):
        assert ours.get_last_lr() == theirs.get_last_lr()
        assert [g[key] for g in mine.param_groups] == [g[key] for g in reference.param_groups]
        mine.step()
        reference.step()
        ours.step()
        theirs.step()


def test_step_with_closure_matches_torch():
    weights, _ = _weights_and_grads(4)
    ours = [spawnml.tensor(w, requires_grad=True) for w in weights[:1]]
    theirs = [torch.tensor(w, requires_grad=True) for w in weights[:1]]
    mine, reference = optim.SGD(ours, lr=0.1, momentum=0.5), torch.optim.SGD(theirs, lr=0.1, momentum=0.5)

    def closure(lib, params, opt):
        def run():
            opt.zero_grad()
            loss = (lib.tanh(params[0]) * params[0]).sum()
            loss.backward()
            return loss

        return run

    for _ in range(3):
        got = mine.step(closure(spawnml, ours, mine))
        want = reference.step(closure(torch, theirs, reference))
        np.testing.assert_allclose(got.item(), want.item(), rtol=RTOL)
    assert_close(ours[0], theirs[0])
