"""The autograd engine against PyTorch: graph bookkeeping, errors, and the basic operations."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from spawnml.autograd import Function

from .torch_parity import assert_close, both, check, torch

rng = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def test_accumulates_across_backward_calls_and_shared_inputs():
    (x,), (tx,) = both([f32(3, 2)])
    for lib, t in ((spawnml, x), (torch, tx)):
        (t * t + t).sum().backward(retain_graph=True)
        (lib.exp(t) * t).mean().backward()
    assert_close(x.grad, tx.grad)


def test_second_backward_through_freed_graph_raises():
    x = spawnml.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_retain_graph_allows_second_backward():
    (x,), (tx,) = both([f32(4)])
    for t in (x, tx):
        y = (t * t).sum()
        y.backward(retain_graph=True)
        y.backward()
    assert_close(x.grad, tx.grad)


def test_in_place_on_leaf_that_requires_grad_raises():
    x = spawnml.ones(3, requires_grad=True)
    with pytest.raises(spawnml.AutogradError, match="leaf Variable that requires grad"):
        x.add_(1)
    with spawnml.no_grad():
        x.add_(1)
    np.testing.assert_array_equal(x.detach().numpy(), [2, 2, 2])


def test_in_place_change_of_a_saved_tensor_is_detected():
    x = spawnml.ones(3, requires_grad=True)
    y = x * 2
    z = y * y  # saves y
    y.mul_(3)
    with pytest.raises(spawnml.AutogradError, match="modified by an inplace operation"):
        z.sum().backward()


def test_in_place_ops_are_recorded_like_torch():
    (x,), (tx,) = both([f32(2, 3)])
    for t in (x, tx):
        y = t * 2
        y.add_(t)
        y.mul_(t)
        y.sum().backward()
    assert_close(x.grad, tx.grad)


def test_no_grad_and_enable_grad():
    x = spawnml.ones(2, requires_grad=True)
    with spawnml.no_grad():
        assert not (x * 2).requires_grad
        with spawnml.enable_grad():
            assert (x * 2).requires_grad

    @spawnml.no_grad()
    def untracked(t):
        return t + 1

    assert not untracked(x).requires_grad
    assert spawnml.is_grad_enabled()


def test_detach_retain_grad_and_leaf_flags():
    (x,), (tx,) = both([f32(3)])
    results = []
    for t in (x, tx):
        y = t * 3
        y.retain_grad()
        (y * y.detach()).sum().backward()
        results.append((y.grad, y.is_leaf, y.detach().requires_grad))
    assert_close(results[0][0], results[1][0])
    assert results[0][1:] == results[1][1:] == (False, False)
    assert_close(x.grad, tx.grad)


def test_errors_where_torch_raises():
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        spawnml.tensor([1, 2], requires_grad=True)
    x = spawnml.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(spawnml.ones(3))
    with pytest.raises(RuntimeError, match="does not require grad"):
        spawnml.ones(2).sum().backward()
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        (x * 2).requires_grad = False
    with pytest.raises(spawnml.InvalidArgumentError, match="shapes cannot be multiplied"):
        spawnml.ones(2, 3) @ spawnml.ones(2, 3)


def test_second_order_gradient_with_create_graph():
    (x,), (tx,) = both([f32(5)])
    grads = []
    for lib, t in ((spawnml, x), (torch, tx)):
        y = (lib.tanh(t) * t * t).sum()
        y.backward(create_graph=True)
        first = t.grad
        t.grad = None
        first.sum().backward()
        grads.append(t.grad)
    assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-5)


def test_custom_function():
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x * x

    (x,), (tx,) = both([f32(4)])
    Cube.apply(x).sum().backward()
    (tx**3).sum().backward()
    assert_close(x.grad, tx.grad)


BINARY = {
    "add": lambda m, a, b: m.add(a, b, alpha=2),
    "sub": lambda m, a, b: a - b,
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "matmul": lambda m, a, b: a @ b.transpose(-1, -2),
    "where": lambda m, a, b: m.where(a > b, a, b),
    "rsub_scalar": lambda m, a, b: 2.5 - a * b,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 1, 4), (3, 4)), ((4,), (2, 3, 4))])
def test_binary_ops_broadcast_like_torch(name, shapes):
    if name == "matmul" and len(shapes[0]) == 1:
        shapes = ((4,), (2, 3, 4))
    check(BINARY[name], [f32(*shapes[0]), f32(*shapes[1])])


UNARY = {
    "exp": lambda m, x: m.exp(x),
    "log": lambda m, x: m.log(x.abs()),
    "sqrt": lambda m, x: m.sqrt(x.abs()),
    "abs": lambda m, x: m.abs(x),
    "relu": lambda m, x: m.relu(x),
    "sigmoid": lambda m, x: m.sigmoid(x),
    "tanh": lambda m, x: m.tanh(x),
    "neg": lambda m, x: -x,
    "pow": lambda m, x: x**3,
    "sum_dims": lambda m, x: x.sum(dim=(0, 2), keepdim=True),
    "sum_all": lambda m, x: x.sum(),
    "mean_dim": lambda m, x: x.mean(-1),
    "reshape_permute": lambda m, x: x.reshape(4, -1).t().permute(1, 0).unsqueeze(1).squeeze(),
    "expand": lambda m, x: x[None].expand(2, -1, -1, -1) if hasattr(x, "__getitem__") else x,
}


@pytest.mark.parametrize("name", sorted(set(UNARY) - {"expand"}))
def test_unary_ops_like_torch(name):
    check(UNARY[name], [f32(2, 3, 4)])


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30], np.float32)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "abs", "relu", "sigmoid", "tanh"])
def test_unary_ops_at_special_values(name):
    raw = {"log": lambda m, x: m.log(x), "sqrt": lambda m, x: m.sqrt(x)}.get(name, UNARY[name])
    check(raw, [SPECIAL])


def test_pow_at_zero_base_and_exponent():
    check(
        lambda m, a, b: a**b,
        [np.array([0.0, 0.0, 2.0, -1.0], np.float32), np.array([0.0, 2.0, 0.5, 2.0], np.float32)],
    )


def test_type_promotion_matches_torch():
    cases = [
        lambda m: m.tensor([1, 2]) / 2,
        lambda m: m.tensor([1, 2]) + 1.5,
        lambda m: m.tensor([1.0], dtype=m.float64) * m.tensor(2.0),
        lambda m: m.tensor([1, 2]).sum(),
        lambda m: m.tensor([True, False]) + 1,
        lambda m: m.tensor([1, 2], dtype=m.int32) * m.tensor(3),
        lambda m: m.arange(5),
        lambda m: m.arange(0.0, 1.0, 0.25),
    ]
    for case in cases:
        assert_close(case(spawnml), case(torch))


def test_empty_tensors():
    check(lambda m, x: (x * 2).sum(0), [np.zeros((0, 3), np.float32)])
    check(lambda m, x: x.mean(), [np.zeros((0,), np.float32)])


def test_gradient_given_to_backward_takes_the_output_dtype():
    grads = []
    for lib in (spawnml, torch):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        (x * x).backward(lib.ones(2, dtype=lib.float32))
        grads.append(x.grad)
    assert_close(grads[0], grads[1])
