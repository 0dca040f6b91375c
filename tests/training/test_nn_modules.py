"""spawnml.nn's module bookkeeping and default initialisation against torch.nn.

Bookkeeping (names, order, shapes, modes, repr, state-dict errors) must be identical. Random
initialisation cannot be (the generators differ), so it is checked statistically against torch's
formulas (torch.nn.init's gain and fan functions) and torch's own draws: on 2^17 samples the
sample moments are within 5 standard errors, and uniform draws reach within 1% of the bound.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import spawnml
import spawnml.nn as nn
from spawnml.nn import init

from .devices import DEVICES, device_or_skip
from .torch_parity import torch

tnn = torch.nn
SAMPLES = (256, 512)


def _models(lib):
    return lib.Sequential(
        lib.Conv2d(3, 8, 3, padding=1),
        lib.BatchNorm2d(8),
        lib.ReLU(),
        lib.MaxPool2d(2),
        lib.Flatten(),
        lib.Linear(8 * 4 * 4, 10, bias=False),
        lib.ModuleList([lib.Dropout(0.1), lib.LayerNorm(10)]),
        lib.ModuleDict({"emb": lib.Embedding(5, 3, padding_idx=0), "act": lib.GELU()}),
    )


def _shapes(state):
    return [(k, tuple(v.shape)) for k, v in state.items()]


def test_names_shapes_and_order_match_torch():
    ours, theirs = _models(nn), _models(tnn)
    assert _shapes(ours.state_dict()) == _shapes(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [type(m).__name__ for m in ours.children()] == [type(m).__name__ for m in theirs.children()]
    assert all(p.requires_grad and p.is_leaf for p in ours.parameters())
    assert str(ours) == str(theirs)


def test_train_eval_and_apply():
    model = _models(nn)
    model.eval()
    assert not any(m.training for m in model.modules())
    model.train()
    assert all(m.training for m in model.modules())
    visited = []
    model.apply(lambda m: visited.append(type(m).__name__))
    assert visited[-1] == "Sequential" and visited[0] == "Conv2d"


def test_registration_follows_assignment():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.scale = nn.Parameter(spawnml.ones(2))
            self.register_buffer("steps", spawnml.zeros(1))
            self.register_buffer("scratch", spawnml.zeros(1), persistent=False)
            self.plain = 3

    net = Net()
    assert list(net.state_dict()) == ["scale", "steps", "fc.weight", "fc.bias"]
    assert [n for n, _ in net.named_buffers()] == ["steps", "scratch"]
    net.steps = spawnml.ones(1)  # assigning to a buffer's name replaces the buffer
    assert net.state_dict()["steps"].numpy().tolist() == [1.0]
    with pytest.raises(
        spawnml.InvalidArgumentError, match="cannot assign 'Tensor' object to parameter 'scale'"
    ):
        net.scale = spawnml.ones(2)
    del net.fc
    assert list(net.state_dict()) == ["scale", "steps"]


def test_load_state_dict_errors_match_torch():
    ours, theirs = nn.Linear(3, 2), tnn.Linear(3, 2)
    bad = {"weight": np.zeros((2, 4), np.float32), "extra": np.zeros(1, np.float32)}
    with pytest.raises(RuntimeError) as expected:
        theirs.load_state_dict({k: torch.tensor(v) for k, v in bad.items()})
    with pytest.raises(spawnml.InvalidArgumentError) as got:
        ours.load_state_dict(bad)
    for fragment in ('Unexpected key(s) in state_dict: "extra"', 'Missing key(s) in state_dict: "bias"'):
        assert fragment in str(expected.value)
        assert fragment.replace('"', "'") in str(got.value)
    assert "size mismatch for weight: copying a param with shape" in str(got.value)
    keys = ours.load_state_dict({"weight": np.ones((2, 3), np.float32)}, strict=False)
    assert keys.missing_keys == ["bias"] and keys.unexpected_keys == []
    np.testing.assert_array_equal(ours.weight.detach().numpy(), np.ones((2, 3), np.float32))


def test_to_moves_parameters_in_place():
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    weight = model[0].weight
    values = weight.detach().numpy().copy()
    model.to(spawnml.float64)
    assert model[0].weight is weight and weight.dtype == np.float64
    assert model[1].num_batches_tracked.dtype == np.int64
    np.testing.assert_array_equal(weight.detach().numpy(), values.astype(np.float64))


@pytest.mark.parametrize(
    ("nonlinearity", "param"),
    [
        ("linear", None),
        ("conv2d", None),
        ("sigmoid", None),
        ("tanh", None),
        ("relu", None),
        ("leaky_relu", None),
        ("leaky_relu", 0.2),
        ("selu", None),
    ],
)
def test_calculate_gain_matches_torch(nonlinearity, param):
    assert init.calculate_gain(nonlinearity, param) == tnn.init.calculate_gain(nonlinearity, param)


def _sample(fn, *args, shape=SAMPLES, **kwargs):
    tensor = spawnml.empty(*shape)
    fn(tensor, *args, **kwargs)
    return tensor.numpy().astype(np.float64)


def _torch_std(name, shape, **kwargs):
    """The standard deviation torch's own formulas give (uniform: bound / sqrt(3))."""
    fan_in, fan_out = tnn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    if name.startswith("xavier"):
        return kwargs.get("gain", 1.0) * math.sqrt(2.0 / (fan_in + fan_out))
    fan = fan_in if kwargs.get("mode", "fan_in") == "fan_in" else fan_out
    return tnn.init.calculate_gain(kwargs.get("nonlinearity", "leaky_relu"), kwargs.get("a", 0)) / math.sqrt(
        fan
    )


def _check_moments(values, mean, std):
    n = values.size
    assert abs(values.mean() - mean) < 5 * std / math.sqrt(n)
    # The variance of the sample variance is (mu4 - sigma^4) / n; mu4 <= 3 sigma^4 for these.
    assert abs(values.var() - std**2) < 5 * std**2 * math.sqrt(2 / n)


@pytest.mark.parametrize(
    ("name", "kwargs", "shape"),
    [
        ("kaiming_uniform_", {"a": math.sqrt(5)}, SAMPLES),
        ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"}, (64, 32, 3, 3)),
        ("kaiming_normal_", {}, SAMPLES),
        ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}, (64, 32, 3, 3)),
        ("xavier_uniform_", {"gain": 2.0}, SAMPLES),
        ("xavier_normal_", {}, (64, 32, 3, 3)),
    ],
)
def test_init_distributions_follow_torch(name, kwargs, shape):
    std = _torch_std(name, shape, **kwargs)
    values = _sample(getattr(init, name), shape=shape, **kwargs)
    _check_moments(values, 0.0, std)
    reference = getattr(tnn.init, name)(torch.empty(shape), **kwargs).numpy().astype(np.float64)
    _check_moments(reference, 0.0, std)  # the formula is torch's: its own draws pass the same check
    if "uniform" in name:
        bound = math.sqrt(3) * std
        assert np.abs(values).max() <= bound
        assert np.abs(values).max() > 0.99 * bound


def test_uniform_normal_constant():
    values = _sample(init.uniform_, -2.0, 3.0)
    assert values.min() >= -2 and values.max() < 3
    _check_moments(values, 0.5, 5 / math.sqrt(12))
    _check_moments(_sample(init.normal_, 1.5, 0.3), 1.5, 0.3)
    assert set(np.unique(_sample(init.constant_, 0.25))) == {0.25}
    assert set(np.unique(_sample(init.zeros_))) == {0.0} and set(np.unique(_sample(init.ones_))) == {1.0}
    with pytest.raises(spawnml.InvalidArgumentError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(spawnml.empty(3))


@pytest.mark.parametrize(
    "make",
    [lambda lib: lib.Linear(300, 200), lambda lib: lib.Conv2d(16, 64, 5), lambda lib: lib.Conv1d(40, 400, 3)],
    ids=["Linear", "Conv2d", "Conv1d"],
)
def test_default_layer_initialisation_follows_torch(make):
    ours, theirs = make(nn), make(tnn)
    fan_in, _ = tnn.init._calculate_fan_in_and_fan_out(theirs.weight)
    bound = 1 / math.sqrt(fan_in)  # torch: kaiming_uniform_(a=sqrt(5)) weights, U(+-1/sqrt(fan_in)) bias
    weight = ours.weight.detach().numpy().astype(np.float64)
    assert np.abs(weight).max() <= bound and np.abs(weight).max() > 0.99 * bound
    assert np.abs(theirs.weight.detach().numpy()).max() <= bound
    _check_moments(weight, 0.0, bound / math.sqrt(3))
    bias = ours.bias.detach().numpy()
    assert np.abs(bias).max() <= bound
    assert np.abs(theirs.bias.detach().numpy()).max() <= bound


def test_norm_and_embedding_initialisation_match_torch():
    for ours, theirs in (
        (nn.BatchNorm2d(4), tnn.BatchNorm2d(4)),
        (nn.LayerNorm([2, 3]), tnn.LayerNorm([2, 3])),
        (nn.GroupNorm(2, 4), tnn.GroupNorm(2, 4)),
    ):
        for key, value in theirs.state_dict().items():
            np.testing.assert_array_equal(ours.state_dict()[key].numpy(), value.numpy())
    emb = nn.Embedding(1000, 64, padding_idx=-1)
    assert emb.padding_idx == tnn.Embedding(1000, 64, padding_idx=-1).padding_idx == 999
    weight = emb.weight.detach().numpy().astype(np.float64)
    assert not weight[999].any()
    _check_moments(weight[:999], 0.0, 1.0)


def test_repr_matches_torch():
    def build(lib):
        return lib.Sequential(
            lib.BatchNorm1d(8, momentum=None, bias=False),
            lib.AvgPool2d(2),
            lib.AdaptiveAvgPool2d(1),
            lib.GroupNorm(2, 4),
            lib.LeakyReLU(),
            lib.Softmax(1),
            lib.LogSoftmax(dim=-1),
            lib.CrossEntropyLoss(),
            lib.Conv1d(2, 4, 3, stride=2, padding=1, groups=2, bias=False),
            lib.Conv2d(2, 4, 3, padding="same", dilation=2),
            lib.Identity(),
            lib.SiLU(),
            lib.GELU("tanh"),
            lib.LayerNorm([2, 3], elementwise_affine=False),
        )

    assert str(build(nn)) == str(build(tnn))


@pytest.mark.parametrize("device", DEVICES)
def test_loading_a_models_own_state_dict_keeps_it(device):
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)).to(device_or_skip(device))
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    model.load_state_dict(model.state_dict())  # the same buffers, copied onto themselves
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[key])
