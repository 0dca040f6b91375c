"""Entry-point plugin: registers the CPU backend."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import hookimpl

from .allocator import keep_freed_memory
from .backend import CPUBackend


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    keep_freed_memory()
    register(CPUBackend)
