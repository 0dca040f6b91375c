"""The entry-point module: what this plugin registers with SpawnML."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import hookimpl

from .backend import ExampleBackend
from .exgraph import ExgraphLoader
from .ops import SWISH


@hookimpl
def register_operators(register: Callable[..., None]) -> None:
    register(SWISH)


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    register(ExampleBackend)


@hookimpl
def register_formats(register: Callable[..., None]) -> None:
    register(ExgraphLoader())
