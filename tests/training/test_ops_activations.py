"""Activations and elementwise math against PyTorch: values and gradients on random inputs and
at the kinks, zeros, infinities and NaN; second-order gradients; in-place forms."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
import spawnml.nn.functional as F

from .torch_parity import check, torch

rng = np.random.default_rng(5)
TF = torch.nn.functional

#: Kinks of the piecewise activations (0, ±1, ±3, 6), large values, infinities and NaN.
SPECIAL = np.array(
    [0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 6.0, 2.5, -2.5, 25.0, -25.0, 100.0, -100.0, np.inf, -np.inf, np.nan],
    np.float32,
)

ACTIVATIONS = {
    "relu": {},
    "leaky_relu": {"negative_slope": 0.2},
    "elu": {"alpha": 0.7},
    "selu": {},
    "celu": {"alpha": 1.5},
    "gelu": {},
    "gelu_tanh": {"approximate": "tanh"},
    "silu": {},
    "softplus": {},
    "softplus_beta": {"beta": 2.0, "threshold": 5.0},
    "hardtanh": {"min_val": -1.0, "max_val": 3.0},
    "relu6": {},
    "hardswish": {},
    "hardsigmoid": {},
    "mish": {},
    "logsigmoid": {},
    "sigmoid": {},
    "tanh": {},
    "softsign": {},
    "tanhshrink": {},
    "threshold": {"threshold": 0.5, "value": -2.0},
    "hardshrink": {"lambd": 1.0},
    "softshrink": {"lambd": 1.0},
}


def activation(name: str):
    kwargs = ACTIVATIONS[name]
    base = name.split("_")[0] if name in ("gelu_tanh", "softplus_beta") else name

    def call(m, x):
        return getattr(F if m is spawnml else TF, base)(x, **kwargs)

    return call


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_on_random_inputs(name):
    # The tanh GELU's gradient cancels (1 + tanh) near -3: a tanh an ulp apart moves it by ~1e-6.
    atol = 1e-5 if name == "gelu_tanh" else 1e-6
    check(activation(name), [(rng.standard_normal((4, 5)) * 4).astype(np.float32)], atol=atol)


#: Activations whose gradient torch gives at NaN as its linear branch's on short tensors and as NaN
#: on the vectorized path, which starts at a length that depends on the CPU's vector width (16
#: floats with AVX2): no one answer to compare with.
NAN_GRADIENT_VARIES = {"elu", "celu", "selu", "hardswish"}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_at_kinks_and_special_values(name):
    values = SPECIAL
    if name.startswith("gelu"):  # torch's vectorized GELU gives NaN at ±inf (the limits are inf and 0)
        values = SPECIAL[np.isfinite(SPECIAL) | np.isnan(SPECIAL)]
    if name in NAN_GRADIENT_VARIES:
        values = values[~np.isnan(values)]
    check(activation(name), [values])


def test_activations_and_pointwise_math_of_empty_tensors():
    empty = np.zeros((0, 3), np.float32)
    for name in ACTIVATIONS:
        check(activation(name), [empty])
    for fn in POINTWISE.values():
        check(fn, [empty])


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu", "softplus", "mish", "elu", "logsigmoid"])
def test_activation_second_order_gradient(name):
    x = (rng.standard_normal(7) * 2).astype(np.float32)
    ours, theirs = spawnml.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for lib, t in (("ours", ours), ("theirs", theirs)):
        out = activation(name)(spawnml if lib == "ours" else torch, t)
        out.sum().backward(create_graph=True)
        first, t.grad = t.grad, None
        (first * first).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["relu", "leaky_relu", "elu", "hardtanh", "silu", "hardswish"])
def test_in_place_activation(name):
    def fn(m, x):
        y = x * 1
        out = getattr(F if m is spawnml else TF, name)(y, inplace=True)
        assert out is y
        return y * x

    check(fn, [SPECIAL[:-3]])


POINTWISE = {
    "sin": lambda m, x: m.sin(x),
    "cos": lambda m, x: x.cos(),
    "erf": lambda m, x: m.erf(x),
    "reciprocal": lambda m, x: m.reciprocal(x),
    "rsqrt": lambda m, x: m.rsqrt(x),
    "log1p": lambda m, x: m.log1p(x),
    "expm1": lambda m, x: m.expm1(x),
    "square": lambda m, x: m.square(x),
    "floor": lambda m, x: m.floor(x) * x,
    "ceil": lambda m, x: m.ceil(x) * x,
    "round": lambda m, x: m.round(x) * x,
    "round_decimals": lambda m, x: m.round(x, decimals=2) * x,
    "trunc": lambda m, x: m.trunc(x) * x,
    "sign": lambda m, x: m.sign(x) * x,
}


@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise_on_random_inputs(name):
    x = (rng.standard_normal((3, 4)) * 3).astype(np.float32)
    if name in ("rsqrt", "log1p"):
        x = np.abs(x)
    check(POINTWISE[name], [x])


@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise_at_special_values(name):
    special = np.concatenate(
        [SPECIAL, np.array([0.5, 1.5, -0.5, 2.5e-8, -1e-7, 1e-30, 88.0, -0.999], np.float32)]
    )
    check(POINTWISE[name], [special])


def test_small_arguments_of_log1p_and_expm1_keep_their_precision():
    tiny = np.array([1e-10, -3e-9, 1e-7, 5e-5], np.float32)
    check(lambda m, x: m.log1p(x), [tiny], rtol=2e-7, atol=0)
    check(lambda m, x: m.expm1(x), [tiny], rtol=2e-7, atol=0)


def test_rounding_of_integers_keeps_them():
    for name in ("floor", "ceil", "round", "trunc", "sign"):
        ours = getattr(spawnml, name)(spawnml.tensor([-3, 0, 5]))
        theirs = getattr(torch, name)(torch.tensor([-3, 0, 5]))
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        assert ours.dtype == theirs.numpy().dtype


def test_prelu_glu_and_softmin():
    check(
        lambda m, x, w: (F if m is spawnml else TF).prelu(x, w),
        [SPECIAL.reshape(8, 2), np.array([0.25, -0.5], np.float32)],
    )
    check(
        lambda m, x, w: (F if m is spawnml else TF).prelu(x, w),
        [rng.standard_normal((2, 3, 4)).astype(np.float32), np.array([0.1], np.float32)],
    )
    check(
        lambda m, x: (F if m is spawnml else TF).glu(x, 1),
        [rng.standard_normal((2, 6, 3)).astype(np.float32)],
    )
    check(
        lambda m, x: (F if m is spawnml else TF).softmin(x, -1),
        [rng.standard_normal((3, 4)).astype(np.float32)],
    )


def test_linear():
    check(
        lambda m, x, w, b: (F if m is spawnml else TF).linear(x, w, b),
        [
            rng.standard_normal((2, 3, 4)).astype(np.float32),
            rng.standard_normal((5, 4)).astype(np.float32),
            rng.standard_normal(5).astype(np.float32),
        ],
    )
    check(
        lambda m, x, w: (F if m is spawnml else TF).linear(x, w),
        [rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)],
    )
