"""The backends that device tests run on, each skipped with its own reason where it has no device."""

from __future__ import annotations

import pytest
from spawnml import plugins
from spawnml.backend import Backend

#: Every GPU backend of this repository: each test that runs on one runs on all three.
GPU_BACKENDS = ("webgpu", "opencl", "cuda")


def backend_or_skip(name: str) -> Backend:
    """The backend ``name``, or a skip saying it is not installed or why it has no device here."""
    backend = plugins.backends().get(name)
    if backend is None:
        pytest.skip(f"{name} is not installed")
    status = backend.availability()
    if not status.available:
        pytest.skip(f"{name}: {status.reason}")
    return backend
