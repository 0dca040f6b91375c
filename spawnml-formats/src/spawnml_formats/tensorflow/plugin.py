"""Entry-point plugin: registers the TensorFlow GraphDef format loader."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import hookimpl

from .loader import GraphDefLoader


@hookimpl
def register_formats(register: Callable[..., None]) -> None:
    register(GraphDefLoader())
