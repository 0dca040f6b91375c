"""The pool threads that take parts of split kernels, kept off the CPU of the thread handing them out.

Linux may wake a sleeping thread on the CPU of the thread that wakes it (wake-affine), and on
two cores it did so for every part once the process had been idle for a tenth of a second: the
pool thread then took the caller's CPU from it while the other CPU stayed idle, and each of the
caller's parts took twice as long (MiniLM batch 1 on two threads, its products split: 27.5 ms a
run back to back, 44.6 ms with 0.1 s pauses between runs, 38 ms on one thread). So before parts
are handed out, the caller's CPU is taken out of the pool threads' affinity, with a system call
only when the caller has moved to another CPU since: 32.1 ms with the pauses.

The pool threads are SpawnML's own, so steering them changes nothing for other code. OpenBLAS's
threads, which take the matrix products from ``threads.BLAS_THREADS_WORK`` on, are the process's
(numpy and whatever else uses that BLAS run on them too), so they are left where the system puts
them: steered for each product and put back after it, they made MiniLM's runs on two threads
slower on a loaded machine (``docs/performance.md``, threads).
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
        self._steering = _Steering(self._move)
        self._executor = ThreadPoolExecutor(count, "spawnml-cpu", initializer=self._started)

    def submit(self, fn: Callable[[], None], copies: int) -> list[Future[None]]:
        """``fn`` handed to ``copies`` pool threads, once the threads are off the caller's CPU."""
        self._steering.keep_off(len(self._native_ids), self._allowed)
        return [self._executor.submit(fn) for _ in range(copies)]

    def _started(self) -> None:
        if hasattr(os, "sched_getaffinity"):
            self._allowed = os.sched_getaffinity(0)
        self._native_ids.append(threading.get_native_id())

    def _move(self, count: int, cpus: set[int]) -> None:
        for native_id in self._native_ids[:count]:
            os.sched_setaffinity(native_id, cpus)


class _Steering:
    """Keeps a group of threads off the caller's CPU, moving them (``move(count, cpus)``) only when
    the caller has moved or their number has changed since."""

    def __init__(self, move: Callable[[int, set[int]], None]) -> None:
        self._move = move
        #: The caller's CPU and the number of threads when the threads were last steered.
        self._steered: tuple[int, int] | None = None

    def keep_off(self, count: int, allowed: set[int]) -> None:
        """Move the first ``count`` threads to the CPUs of ``allowed`` but the caller's."""
        cpu = _current_cpu()
        if cpu is None or self._steered == (cpu, count):
            return
        self._steered = (cpu, count)
        others = allowed - {cpu}
        if others:  # a process held to one CPU shares it
            self._move(count, others)


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
