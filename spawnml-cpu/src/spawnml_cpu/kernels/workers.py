"""The pool threads that take parts of split kernels, kept off the CPU of the thread handing them out.

Linux may wake a sleeping thread on the CPU of the thread that wakes it (wake-affine), and on
two cores it did so for every part once the process had been idle for a tenth of a second: the
pool thread then took the caller's CPU from it while the other CPU stayed idle, and each of the
caller's parts took twice as long (MiniLM batch 1 on two threads, its products split: 27.5 ms a
run back to back, 44.6 ms with 0.1 s pauses between runs, 38 ms on one thread). So before parts
are handed out, the caller's CPU is taken out of the pool threads' affinity, with a system call
only when the caller has moved to another CPU since: 32.1 ms with the pauses.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor


@functools.cache
def pool(count: int) -> Workers:
    """The process's pool of ``count`` threads."""
    return Workers(count)


class Workers:
    """``count`` pool threads, started as work comes, steered off the caller's CPU."""

    def __init__(self, count: int) -> None:
        self._native_ids: list[int] = []
        #: The CPUs a pool thread was allowed when it started (inherited from the process).
        self._allowed: set[int] = set()
        #: The caller's CPU and the number of threads when the threads were last steered.
        self._steered: tuple[int, int] | None = None
        self._executor = ThreadPoolExecutor(count, "spawnml-cpu", initializer=self._started)

    def submit(self, fn: Callable[[], None], copies: int) -> list[Future[None]]:
        """``fn`` handed to ``copies`` pool threads, once the threads are off the caller's CPU."""
        self._keep_off(_current_cpu())
        return [self._executor.submit(fn) for _ in range(copies)]

    def _started(self) -> None:
        if hasattr(os, "sched_getaffinity"):
            self._allowed = os.sched_getaffinity(0)
        self._native_ids.append(threading.get_native_id())

    def _keep_off(self, cpu: int | None) -> None:
        if cpu is None or self._steered == (cpu, len(self._native_ids)):
            return
        self._steered = (cpu, len(self._native_ids))
        allowed = self._allowed - {cpu}
        if allowed:  # a process held to one CPU shares it
            for native_id in self._native_ids:
                os.sched_setaffinity(native_id, allowed)


def _current_cpu() -> int | None:
    """The CPU the calling thread runs on, or None where the system does not say or threads
    cannot be steered (Linux does both)."""
    getcpu = _getcpu()
    return None if getcpu is None else getcpu()


@functools.cache
def _getcpu() -> Callable[[], int] | None:
    """libc's ``sched_getcpu`` (Python has no binding for it), or None where it or
    ``os.sched_setaffinity`` is missing."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    return getattr(ctypes.CDLL(None), "sched_getcpu", None)
