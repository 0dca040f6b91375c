"""Entry-point plugin: registers the GGUF format loader."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import hookimpl

from .loader import GGUFLoader


@hookimpl
def register_formats(register: Callable[..., None]) -> None:
    register(GGUFLoader())
