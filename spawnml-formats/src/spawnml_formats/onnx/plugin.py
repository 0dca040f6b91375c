"""Entry-point plugin: registers the ONNX format loader (placeholder)."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import hookimpl


@hookimpl
def register_formats(register: Callable[..., None]) -> None:
    pass
