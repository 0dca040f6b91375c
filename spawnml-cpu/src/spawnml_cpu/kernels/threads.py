"""Splitting one kernel's work over the cores the CPU backend may use.

The backend uses as many threads as numpy's BLAS is set to (``threadpoolctl.threadpool_limits``
sets it; onnxruntime's ``intra_op_num_threads`` is the counterpart). Large convolutions cut their
work into independent parts (tiles of output rows, ranges of channels or of pixels) that the
calling thread and pool threads take one at a time, each part single-threaded in BLAS and in
the compiled loops, which run without the GIL. A thread that the system leaves waiting only
delays the part it took: the others take what is left. OpenBLAS's own threads split every GEMM
into fixed halves and wait for both, which stalls whenever another process holds a core.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

#: Parts per thread: more than one, so a thread that is kept waiting holds up little work.
PARTS_PER_THREAD = 2
#: The least work (multiply-adds) worth splitting: below it, handing parts over costs more.
MIN_SPLIT_WORK = 4_000_000

_lock = threading.Lock()


@functools.cache
def _blas() -> Any | None:
    """threadpoolctl's controller of numpy's BLAS, or None where it finds none to control."""
    import numpy as np  # noqa: F401  (loads the BLAS that threadpoolctl looks for)
    from threadpoolctl import ThreadpoolController

    controllers = ThreadpoolController().select(user_api="blas").lib_controllers
    return controllers[0] if controllers else None


@functools.cache
def _pool(workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="spawnml-cpu")


def thread_count() -> int:
    """How many threads the kernels may use: numpy's BLAS thread count (1 where it is unknown)."""
    blas = _blas()
    return 1 if blas is None else max(1, blas.get_num_threads())


def part_count(work: int, limit: int) -> int:
    """How many parts to cut ``work`` multiply-adds into, at most ``limit``; 1 to run it whole."""
    threads = thread_count()
    if threads == 1 or work < MIN_SPLIT_WORK:
        return 1
    return max(1, min(limit, threads * PARTS_PER_THREAD))


def run_parts(parts: Sequence[Callable[[], None]]) -> None:
    """Run every part, on the calling thread and the pool's, with BLAS single-threaded meanwhile
    (so a kernel left whole still never waits on OpenBLAS's threads)."""
    threads = thread_count()
    if threads == 1:
        for part in parts:
            part()
        return
    blas = _blas()
    pending = iter(parts)

    def drain() -> None:
        for part in pending:  # a list iterator hands each part to one thread only
            part()

    with _lock:  # one kernel at a time sets BLAS to one thread and back
        blas.set_num_threads(1)
        try:
            helpers = [_pool(threads - 1).submit(drain) for _ in range(min(threads, len(parts)) - 1)]
            try:
                drain()
            finally:
                for helper in helpers:
                    helper.result()
        finally:
            blas.set_num_threads(threads)
