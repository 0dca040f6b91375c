"""Eager operations after the plugin registry is refreshed run on the backends it made anew, not on
the ones an earlier call was prepared for (a GPU backend's new instance opens its own device)."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from spawnml import plugins

from tests.backends import GPU_BACKENDS, backend_or_skip


@pytest.mark.parametrize("device", ["cpu", *GPU_BACKENDS])
def test_a_call_prepared_before_a_refresh_runs_on_the_new_backend(device):
    backend_or_skip(device)
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    before = spawnml.tensor(values).to(device).t()  # prepares Transpose on this backend instance
    np.testing.assert_array_equal(before.numpy(), values.T)
    plugins.refresh()
    after = spawnml.tensor(values).to(device)
    assert after.backend is plugins.backends()[device]
    np.testing.assert_array_equal(after.t().numpy(), values.T)
