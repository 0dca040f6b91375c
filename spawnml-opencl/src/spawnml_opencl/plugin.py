"""Entry-point plugin: registers the OpenCL backend."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import LazyBackend, hookimpl


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    register(LazyBackend("opencl", "spawnml_opencl.backend:OpenCLBackend"))
