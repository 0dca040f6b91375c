"""Entry-point plugin: adds ``spawnml wasi`` (Wasmtime is imported only when the command runs)."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import hookimpl

from .command import WASI


@hookimpl
def register_commands(register: Callable[..., None]) -> None:
    register(WASI)
