"""The pool threads that take parts of split kernels, kept off the CPU of the thread handing them out.

Linux may wake a sleeping thread on the CPU of the thread that wakes it (wake-affine), and on
two cores it did so for every part once the process had been idle for a tenth of a second: the
pool thread then took the caller's CPU from it while the other CPU stayed idle, and each of the
caller's parts took twice as long (MiniLM batch 1 on two threads, its products split: 27.5 ms a
run back to back, 44.6 ms with 0.1 s pauses between runs, 38 ms on one thread). So before parts
are handed out, the caller's CPU is taken out of the pool threads' affinity, with a system call
only when the caller has moved to another CPU since: 32.1 ms with the pauses.

OpenBLAS's own threads, which take the matrix products from ``threads.BLAS_THREADS_WORK`` on, are
steered the same way (PP-OCRv4 rec's last product on two threads: 0.6 ms as a rule, but up to
11 ms when its thread was woken on the caller's CPU). They are the process's, not SpawnML's: numpy
and whatever else uses that BLAS run on them too. So they are steered only for the length of one
product's region (``threads.blas_for``) and put back on the CPUs they had when it ends; the pool
threads are SpawnML's own and stay where they were steered.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


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


def keep_blas_threads_off(blas: Any, count: int) -> Callable[[], None] | None:
    """Steer the threads that run a product on ``count`` threads of ``blas`` (threadpoolctl's
    controller of numpy's BLAS) off the caller's CPU, where it is OpenBLAS on threads of its own;
    returns what puts them back on the CPUs they had (None where nothing was moved)."""
    threads = _openblas_threads(blas) if count > 1 else None
    return None if threads is None else threads.keep_off(count - 1)  # the last index is the caller


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


class _OpenBlasThreads:
    """OpenBLAS's own threads, steered through its ``openblas_setaffinity``."""

    #: Bytes of a ``cpu_set_t`` (glibc's: 1024 CPUs).
    CPU_SET_BYTES = 128

    def __init__(self, setaffinity: Any, getaffinity: Any) -> None:
        self._setaffinity, self._getaffinity = setaffinity, getaffinity

    def keep_off(self, count: int) -> Callable[[], None] | None:
        """Move OpenBLAS's first ``count`` threads (all but the caller) off the caller's CPU; returns
        what moves the ones moved back (None where none was: the caller's CPU is their only one)."""
        cpu = _current_cpu()
        if cpu is None:
            return None
        moved = []
        for index in range(count):
            mask = ctypes.create_string_buffer(self.CPU_SET_BYTES)
            if self._getaffinity(index, len(mask), mask) != 0:
                continue
            cpus = int.from_bytes(mask.raw, "little")
            others = cpus & ~(1 << cpu)
            if others and others != cpus:
                self._set(index, others)
                moved.append((index, cpus))
        if not moved:
            return None

        def put_back() -> None:
            for index, cpus in moved:
                self._set(index, cpus)

        return put_back

    def _set(self, index: int, cpus: int) -> None:
        self._setaffinity(index, self.CPU_SET_BYTES, cpus.to_bytes(self.CPU_SET_BYTES, "little"))


@functools.cache
def _openblas_threads(blas: Any) -> _OpenBlasThreads | None:
    """The threads of ``blas`` where it is OpenBLAS on threads of its own and they can be steered
    (with OpenMP, ``openblas_setaffinity`` only complains), else None."""
    if blas.internal_api != "openblas" or blas.threading_layer != "pthreads" or _getcpu() is None:
        return None
    names = ("openblas_setaffinity", "openblas_getaffinity")
    setaffinity, getaffinity = (getattr(blas.dynlib, name, None) for name in names)
    if setaffinity is None or getaffinity is None:
        return None
    for function in (setaffinity, getaffinity):
        function.argtypes = (ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p)
    return _OpenBlasThreads(setaffinity, getaffinity)


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
