"""var, std and logsumexp against PyTorch: corrections, dimensions, constant and single-element
slices (std's gradient is 0 where it is 0; one element has no variance), and infinite inputs."""

from __future__ import annotations

import numpy as np
import pytest

from .torch_parity import check

rng = np.random.default_rng(9)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_and_std_over_dimensions_and_corrections(name):
    x = f32(3, 4, 5) * 2 + 1
    check(lambda m, t: getattr(m, name)(t), [x], rtol=1e-4, atol=1e-6)
    check(lambda m, t: getattr(t, name)(1, keepdim=True), [x], rtol=1e-4, atol=1e-6)
    check(lambda m, t: getattr(m, name)(t, (0, 2), correction=0), [x], rtol=1e-4, atol=1e-6)
    check(lambda m, t: getattr(m, name)(t, -1, False), [x], rtol=1e-4, atol=1e-6)  # unbiased=False
    check(lambda m, t: getattr(m, name)(t, unbiased=False), [x], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_and_std_of_constant_and_single_element_slices(name):
    constant_row = np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]], np.float32)
    check(lambda m, t: getattr(m, name)(t, 1), [constant_row], rtol=1e-5, atol=1e-6)
    check(lambda m, t: getattr(m, name)(t, 0), [np.array([[3.0, -1.0]], np.float32)])  # n - 1 = 0: NaN


def test_logsumexp():
    check(lambda m, t: m.logsumexp(t, 1), [f32(3, 4) * 30])
    check(lambda m, t: t.logsumexp((0, 2), keepdim=True), [f32(2, 3, 4)])
    infinite = np.array([[-np.inf, -np.inf], [1.0, np.inf], [0.0, 1.0], [-np.inf, 2.0]], np.float32)
    check(lambda m, t: m.logsumexp(t, -1), [infinite])
