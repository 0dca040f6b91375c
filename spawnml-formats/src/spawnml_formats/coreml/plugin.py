"""Entry-point plugin: registers the Core ML format loader."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import hookimpl

from .loader import CoreMLLoader


@hookimpl
def register_formats(register: Callable[..., None]) -> None:
    register(CoreMLLoader())
