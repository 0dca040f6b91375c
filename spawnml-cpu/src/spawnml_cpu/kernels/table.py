"""The one kernel table of the CPU backend, filled by the family modules."""

from __future__ import annotations

from spawnml.backend import KernelTable

KERNELS = KernelTable()
