"""var, std, logsumexp, norm and normalize against PyTorch: corrections, dimensions, constant,
zero and single-element slices (std's and norm's gradients are 0 where they are 0; one element
has no variance), and infinite inputs."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
import spawnml.nn.functional as F

from .torch_parity import check, torch

TF = torch.nn.functional

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


ZERO_ROW = np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0], [1.0, 2.0, -2.0]], np.float32)


@pytest.mark.parametrize("p", [2, 1, 3, 0.5, np.inf, -np.inf, 0, "fro"])
def test_vector_norms_with_zero_rows(p):
    if p == 0.5:  # |x|^(p-1) is infinite at 0 for p < 1: only rows without zeros
        check(lambda m, t: m.norm(t, p, 1), [np.abs(f32(3, 4)) + 0.1], rtol=1e-5)
        return
    check(lambda m, t: m.norm(t, p, 1), [ZERO_ROW], rtol=1e-5)
    check(lambda m, t: t.norm(p, dim=(0, 1), keepdim=True), [f32(2, 3, 4)], rtol=1e-5)


def test_norm_of_every_element():
    check(lambda m, t: t.norm(), [f32(3, 4)], rtol=1e-5)


@pytest.mark.parametrize(("p", "dim"), [(2.0, 1), (1.0, -1), (3.0, 0)])
def test_normalize(p, dim):
    def fn(m, t):
        return (F if m is spawnml else TF).normalize(t, p, dim)

    check(fn, [f32(3, 4)], rtol=1e-5)
    check(fn, [ZERO_ROW], rtol=1e-5)  # a zero row divides by eps


def test_cosine_similarity_including_a_zero_vector():
    def fn(m, a, b):
        return (F if m is spawnml else TF).cosine_similarity(a, b, dim=-1)

    check(fn, [f32(4, 5), f32(4, 5)], rtol=1e-5)
    check(fn, [f32(3, 1, 5), f32(4, 5)], rtol=1e-5)  # broadcast
    check(fn, [ZERO_ROW, f32(3, 3)], rtol=1e-5)
