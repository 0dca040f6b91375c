"""What a GPU backend implements: its device, an allocator pooled by size, and programs.

Programs are compiled once per source and launched in order; nothing here waits for the
device except :meth:`Runtime.copy_out`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Every allocation is a multiple of this many bytes (and at least this many).
ALIGN = 16


class Runtime(ABC):
    """One device. Subclasses allocate, copy, compile and launch; pooling and caching live here."""

    def __init__(self) -> None:
        self._pool: dict[int, list[Any]] = defaultdict(list)
        self._programs: dict[str, Any] = {}

    # Device.
    @abstractmethod
    def describe(self) -> str:
        """The device's name and kind, for messages and ``device_name()``."""

    @property
    @abstractmethod
    def max_groups(self) -> int:
        """The most workgroups one launch may have along one grid dimension."""

    @property
    @abstractmethod
    def max_buffer_bytes(self) -> int:
        """The largest buffer a kernel may bind."""

    # Memory.
    def alloc(self, nbytes: int) -> tuple[Any, int]:
        """A device buffer of at least ``nbytes`` (from the pool when one is free) and its size."""
        size = max(ALIGN, -(-nbytes // ALIGN) * ALIGN)
        free = self._pool.get(size)
        return (free.pop() if free else self._alloc(size)), size

    def free(self, handle: Any, size: int) -> None:
        """Return a buffer of ``size`` bytes to the pool; work already queued on it still runs."""
        self._pool[size].append(handle)

    @abstractmethod
    def _alloc(self, size: int) -> Any:
        """A new device buffer of ``size`` bytes."""

    @abstractmethod
    def copy_in(self, handle: Any, data: np.ndarray) -> None:
        """Write ``data`` to the start of ``handle``, after all work launched before."""

    @abstractmethod
    def copy_out(self, handle: Any, nbytes: int) -> bytes:
        """The first ``nbytes`` of ``handle`` once all work launched before is done."""

    # Programs.
    def program(self, source: str, name: str) -> Any:
        """The compiled entry point ``name`` of ``source``, compiled on first use."""
        if source not in self._programs:
            self._programs[source] = self.compile(source, name)
        return self._programs[source]

    @abstractmethod
    def compile(self, source: str, name: str) -> Any:
        """Compile ``source``; raise :class:`~spawnml.errors.ExecutionError`-worthy errors as is."""

    @abstractmethod
    def launch(
        self, program: Any, buffers: Sequence[Any], grid: tuple[int, int, int], scalars: Sequence[np.generic]
    ) -> None:
        """Queue ``program`` over ``grid`` workgroups with ``buffers`` and ``scalars`` in parameter order."""
