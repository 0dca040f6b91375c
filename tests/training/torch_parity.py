"""Run the same computation in SpawnML and in PyTorch and compare values and gradients."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import spawnml
import torch

#: float32 results of the same math on both sides agree to a few ulps of the largest values.
RTOL, ATOL = 1e-5, 1e-6


def both(arrays: Sequence[np.ndarray], device: str = "cpu") -> tuple[list[Any], list[Any]]:
    """Leaf tensors requiring grad (floats) in SpawnML and torch holding the same ``arrays``."""
    ours = [spawnml.tensor(a, device=device, requires_grad=a.dtype.kind == "f") for a in arrays]
    theirs = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    return ours, theirs


def assert_close(ours: Any, theirs: Any, rtol: float = RTOL, atol: float = ATOL) -> None:
    got = ours.detach().numpy() if hasattr(ours, "detach") else np.asarray(ours)
    want = theirs.detach().numpy()
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def check(
    fn: Callable[..., Any],
    arrays: Sequence[np.ndarray],
    torch_fn: Callable[..., Any] | None = None,
    rtol: float = RTOL,
    atol: float = ATOL,
    device: str = "cpu",
) -> None:
    """``fn`` (SpawnML's namespace) and ``torch_fn`` (default: ``fn`` on torch's) agree in value
    and in the gradient of every float input, for the upstream gradient of a fixed random tensor."""
    ours, theirs = both(arrays, device)
    out = fn(spawnml, *ours)
    expected = (torch_fn or fn)(torch, *theirs)
    assert_close(out, expected, rtol, atol)
    if not expected.requires_grad:
        return
    upstream = np.random.default_rng(7).standard_normal(expected.shape).astype(np.float32)
    out.backward(spawnml.tensor(upstream, device=device))
    expected.backward(torch.tensor(upstream))
    for mine, reference in zip(ours, theirs, strict=True):
        if reference.grad is not None:
            assert mine.grad is not None
            assert_close(mine.grad, reference.grad, rtol, atol)
