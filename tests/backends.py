"""The backends that device tests run on, each skipped with its own reason where it has no device."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from spawnml import UnsupportedOperatorError, plugins
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


def refused_operators(name: str, create: Callable[[list[str]], object]) -> set[str]:
    """The operator types for which ``create(providers=[name])`` is refused at load, each named with
    the backend's reason; empty when it loads."""
    try:
        create([name])
    except UnsupportedOperatorError as error:
        assert error.providers == (name,)
        assert all(f"{name}: " in operator.describe() for operator in error.operators), str(error)
        return {operator.op_type for operator in error.operators}
    return set()
