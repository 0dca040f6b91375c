"""glibc's allocator set for inference, when asked: the arrays one run frees serve the next run.

By default glibc maps each array past its mmap threshold afresh and gives freed memory at the top
of the heap back to the system, so every run's large activations fault their pages in again
(PP-OCRv4 det: about 7,400 minor page faults per run, a fifth of its CPU time). Raising both
thresholds keeps that memory for the next run, but ``mallopt`` sets them for the whole process,
every library in it included, and keeps up to :data:`TRIM_THRESHOLD` of freed memory that the
system would otherwise get back. So SpawnML leaves glibc as it is unless the user asks: with
``SPAWNML_CPU_ALLOCATOR=reuse`` set when the CPU plugin loads, or by calling
:func:`keep_freed_memory` (``docs/performance.md`` says what each costs).
"""

from __future__ import annotations

import ctypes
import os
from functools import cache

from spawnml.errors import InvalidArgumentError

#: The environment variable that opts in when the plugin loads: ``reuse`` (or ``system``, the default).
ENVIRONMENT_VARIABLE = "SPAWNML_CPU_ALLOCATOR"
#: Arrays up to this size come from the heap instead of fresh mappings.
MMAP_THRESHOLD = 32 << 20
#: Free memory kept at the top of the heap before it goes back to the system.
TRIM_THRESHOLD = 256 << 20
#: ``mallopt`` parameters, from glibc's ``malloc.h``.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def reuse_requested() -> bool:
    """Whether ``SPAWNML_CPU_ALLOCATOR`` asks for :func:`keep_freed_memory` (``reuse``); unset or
    ``system`` leaves glibc's defaults, and any other value is refused."""
    value = os.environ.get(ENVIRONMENT_VARIABLE, "system")
    if value not in ("reuse", "system"):
        raise InvalidArgumentError(
            f"{ENVIRONMENT_VARIABLE}={value!r}: expected 'reuse' (keep freed memory for the next run, "
            "process-wide) or 'system' (glibc's defaults, the default)"
        )
    return value == "reuse"


@cache
def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for the whole process; whether they were raised (not on
    other C libraries). Once called, they stay raised: glibc cannot say what they were before."""
    if not _glibc():
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
