"""Entry-point plugin: adds ``spawnml serve`` (the web stack is imported only when it runs)."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import hookimpl

from .command import SERVE


@hookimpl
def register_commands(register: Callable[..., None]) -> None:
    register(SERVE)
