"""The backends training tests run on: every installed one, skipped only where it has no device."""

from __future__ import annotations

from tests.backends import GPU_BACKENDS, backend_or_skip

DEVICES = ("cpu", *GPU_BACKENDS)


def device_or_skip(name: str) -> str:
    """``name``, or a skip that gives the backend's own reason for having no device here."""
    backend_or_skip(name)
    return name
