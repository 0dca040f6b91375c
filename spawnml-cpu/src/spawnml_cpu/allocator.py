"""glibc's allocator set for inference: the arrays one run frees serve the next run.

By default glibc maps each array past its mmap threshold afresh and gives freed memory at the top
of the heap back to the system, so every run's large activations fault their pages in again
(PP-OCRv4 det: about 7,400 minor page faults per run, a fifth of its CPU time). The CPU backend
raises both thresholds once per process where the C library is glibc; ``SPAWNML_CPU_ALLOCATOR=system``
leaves them as they are.
"""

from __future__ import annotations

import ctypes
import os
from functools import cache

#: Arrays up to this size come from the heap instead of fresh mappings.
MMAP_THRESHOLD = 32 << 20
#: Free memory kept at the top of the heap before it goes back to the system.
TRIM_THRESHOLD = 256 << 20
#: ``mallopt`` parameters, from glibc's ``malloc.h``.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


@cache
def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds; whether they were raised (not on other C libraries,
    nor when ``SPAWNML_CPU_ALLOCATOR`` is ``system``)."""
    if os.environ.get("SPAWNML_CPU_ALLOCATOR") == "system" or not _glibc():
        return False
    mallopt = ctypes.CDLL(None).mallopt
    heap = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    return bool(heap and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def _glibc() -> bool:
    """Whether the process runs on glibc (other C libraries have no such thresholds to set)."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, ValueError, OSError):  # no confstr, or no such name outside glibc
        return False
