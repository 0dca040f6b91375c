"""The backends training tests run on: every installed one, skipped only where it has no device."""

from __future__ import annotations

import pytest
from spawnml import plugins

DEVICES = ("cpu", "webgpu", "opencl", "cuda")


def device_or_skip(name: str) -> str:
    """``name``, or a skip that gives the backend's own reason for having no device here."""
    status = plugins.backends()[name].availability()
    if not status.available:
        pytest.skip(f"{name}: {status.reason}")
    return name
