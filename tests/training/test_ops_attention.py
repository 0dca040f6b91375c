"""``scaled_dot_product_attention`` and ``clip_grad_norm_`` against PyTorch: values and
gradients (tolerances of torch_parity: torch's CPU attention sums in blocks, in another order),
including masked-out positions, -inf scores, large scores and gradients of zero or infinite norm."""

from __future__ import annotations

import math

import numpy as np
import pytest
import spawnml
import spawnml.nn.functional as F

from .torch_parity import check, torch

rng = np.random.default_rng(11)
TF = torch.nn.functional


def f32(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def sdpa(m, *args, **kwargs):
    return (F if m is spawnml else TF).scaled_dot_product_attention(*args, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "shapes"),
    [
        ({}, [(2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 7)]),
        ({"is_causal": True}, [(2, 2, 6, 8), (2, 2, 6, 8), (2, 2, 6, 8)]),
        ({"is_causal": True}, [(1, 4, 3), (1, 5, 3), (1, 5, 2)]),  # L < S: top-left aligned
        ({"scale": 0.3}, [(3, 4, 4), (3, 4, 4), (3, 4, 4)]),
    ],
)
def test_attention(kwargs, shapes):
    check(lambda m, q, k, v: sdpa(m, q, k, v, **kwargs), [f32(*s) for s in shapes])


def test_attention_with_large_scores_stays_finite():
    shapes = [(2, 4, 8), (2, 4, 8), (2, 4, 8)]
    check(lambda m, q, k, v: sdpa(m, q, k, v, is_causal=True), [f32(*s, scale=30.0) for s in shapes])


def test_attention_with_a_bool_mask():
    mask = rng.random((5, 6)) > 0.4
    mask[:, 0] = True  # each row attends somewhere
    arrays = [f32(2, 5, 4), f32(2, 6, 4), f32(2, 6, 4)]
    check(lambda m, q, k, v: sdpa(m, q, k, v, attn_mask=m.tensor(mask)), arrays)


def test_attention_with_a_float_mask_of_minus_infinity():
    bias = f32(5, 6)
    bias[rng.random((5, 6)) > 0.6] = -math.inf
    bias[:, 1] = 0.5
    check(lambda m, q, k, v, b: sdpa(m, q, k, v, attn_mask=b), [f32(5, 4), f32(6, 4), f32(6, 3), bias])


def test_attention_refuses_a_mask_with_is_causal():
    q = spawnml.zeros(2, 3)
    with pytest.raises(spawnml.InvalidArgumentError, match="attn_mask should not be set"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=spawnml.ones(3, 3), is_causal=True)


def _clipped(lib, grads: list[np.ndarray], max_norm: float, norm_type: float):
    params = [lib.zeros(*g.shape, requires_grad=True) for g in grads]
    for p, g in zip(params, grads, strict=True):
        p.grad = lib.tensor(g)
    total = lib.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    return total, [p.grad for p in params]


@pytest.mark.parametrize(
    ("grads", "max_norm", "norm_type"),
    [
        ([f32(3, 4), f32(5)], 1.0, 2.0),  # clipped
        ([f32(3, 4) * 0.01, f32(5) * 0.01], 1.0, 2.0),  # under the bound: unchanged
        ([np.zeros((2, 2), np.float32)], 1.0, 2.0),  # zero norm
        ([f32(4, 4), f32(3)], 0.5, math.inf),
        ([f32(4, 4), f32(3)], 2.0, 1.0),
        ([np.array([1.0, math.inf], np.float32)], 1.0, 2.0),  # infinite norm: NaN, as torch
    ],
)
def test_clip_grad_norm(grads, max_norm, norm_type):
    total, clipped = _clipped(spawnml, grads, max_norm, norm_type)
    want_total, want = _clipped(torch, grads, max_norm, norm_type)
    np.testing.assert_allclose(total.numpy(), want_total.numpy(), rtol=1e-6)
    for ours, theirs in zip(clipped, want, strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-7, equal_nan=True)


def test_clip_grad_norm_refuses_a_nonfinite_norm_when_asked():
    p = spawnml.zeros(2, requires_grad=True)
    p.grad = spawnml.tensor([1.0, math.nan])
    with pytest.raises(spawnml.InvalidArgumentError, match="non-finite"):
        spawnml.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
