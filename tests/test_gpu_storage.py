"""GPU storage returned by the cyclic garbage collector: device tensors held in reference cycles
(every autograd graph is one) go back to the pool still usable, on every GPU backend."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import spawnml

from tests.backends import GPU_BACKENDS, backend_or_skip


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def device(request) -> str:
    backend_or_skip(request.param)
    return request.param


def test_buffers_freed_by_the_cyclic_collector_are_pooled_alive(device):
    data = np.arange(1000, dtype=np.float32)
    for _ in range(20):
        cycle: dict = {"tensor": spawnml.tensor(data, device=device)}
        cycle["self"] = cycle
        del cycle
        gc.collect()
        reused = spawnml.tensor(data, device=device)  # takes the pooled buffer
        np.testing.assert_array_equal((reused + 1).numpy(), data + 1)


def test_training_graphs_collected_between_steps(device):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((8, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    expected = np.tanh(x @ w).sum()
    for _ in range(10):
        weight = spawnml.tensor(w, device=device, requires_grad=True)
        loss = spawnml.tanh(spawnml.tensor(x, device=device) @ weight).sum()
        loss.backward()
        np.testing.assert_allclose(loss.item(), expected, rtol=1e-5)
        del weight, loss
        gc.collect()
