"""Entry-point plugin: registers the CPU backend, imported (with numba) when first asked for.

Loading it changes nothing process-wide: glibc's allocator is set only where the user asks
(:mod:`.allocator`), and BLAS's thread count and CPU affinity only inside the kernels' regions
(:mod:`.kernels.threads`).
"""

from __future__ import annotations

from collections.abc import Callable

from spawnml.plugins import LazyBackend, hookimpl

from .allocator import keep_freed_memory, reuse_requested


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    if reuse_requested():
        keep_freed_memory()
    register(LazyBackend("cpu", "spawnml_cpu.backend:CPUBackend"))
