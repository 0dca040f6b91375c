"""Entry-point plugin: registers the SafeTensors format loader."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import hookimpl

from .loader import SafeTensorsLoader


@hookimpl
def register_formats(register: Callable[..., None]) -> None:
    register(SafeTensorsLoader())
