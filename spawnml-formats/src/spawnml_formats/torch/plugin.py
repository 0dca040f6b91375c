"""Entry-point plugin: registers the PyTorch checkpoint loader."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import hookimpl

from .loader import TorchCheckpointLoader


@hookimpl
def register_formats(register: Callable[..., None]) -> None:
    register(TorchCheckpointLoader())
