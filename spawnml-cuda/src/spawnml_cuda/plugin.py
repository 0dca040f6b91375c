"""Entry-point plugin: registers the CUDA backend."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import LazyBackend, hookimpl


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    register(LazyBackend("cuda", "spawnml_cuda.backend:CUDABackend"))
