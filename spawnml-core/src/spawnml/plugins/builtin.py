"""Core's built-in plugin: the ai.onnx operator schemas, registered like any plugin's."""

from __future__ import annotations

from collections.abc import Callable

from ..ops.defs import SCHEMAS
from .hookspecs import hookimpl


@hookimpl
def register_operators(register: Callable[..., None]) -> None:
    for schema in SCHEMAS:
        register(schema)
