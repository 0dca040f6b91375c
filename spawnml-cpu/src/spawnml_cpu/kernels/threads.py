"""How the CPU kernels use the cores: the compiled loops split over threads, BLAS where it pays.

The backend runs a session's kernels on the session's ``intra_op_num_threads`` threads
(:func:`spawnml.threads.intra_op_threads`), or where it leaves the choice to the backend, on as many
threads as the process has CPUs it may run on (``os.sched_getaffinity``). It never reads or keeps
a process-wide setting for this: BLAS's own thread count (``threadpoolctl``, ``OPENBLAS_NUM_THREADS``)
is what numpy's products outside SpawnML run on, and is left so. The rules, from measurements on
two cores shared with other processes:

- Large work (GGUF's quantized products, on a compiled loop that runs without the GIL) is
  cut into parts that the calling thread and pool threads take one at a time. A thread that
  the system keeps waiting only delays the part it took: the others take what is left, and
  one that has not started yet is not waited for.
- Matrix products (:func:`.nn_common.matmul`: MatMul, Gemm, attention, the integer and
  recurrent ones, GGUF's dequantized weights; 1x1 convolutions and those by kernel tap) from
  :data:`BLAS_THREADS_WORK` multiply-adds on run on BLAS's own threads, which spin between
  products, so that handing one over costs a few microseconds (they are the process's, and SpawnML
  never moves them, see :mod:`.workers`); smaller ones run on one BLAS thread, or for
  float32 1x1 convolutions on the register-tiled loop of :mod:`.tiles` (as all of those do on
  one thread).
- The other convolutions' GEMMs run on one BLAS thread each. Those from
  :data:`MIN_SPLIT_PRODUCT` multiply-adds an image on are cut instead into spans of output rows
  that the threads take as the loops' parts are, so that the im2col copies run on every thread
  too; depthwise ones from :data:`MIN_SPLIT_DEPTHWISE` into spans of channels.
- Elementwise passes (fused chains, the vectorized activations, numpy's Exp and Tanh) are cut
  into spans of elements from ``elementwise.MIN_SPLIT_ELEMENTS`` on (:func:`.elementwise.over_threads`):
  they are memory bound, and smaller ones cost about as much to hand over as they gain.

Matrix-vector products run on one BLAS thread whatever their size, so that equal weights give
equal outputs on any thread count (see :func:`.nn_common.matmul`).

Same inputs, same bits: how a kernel splits its work and how many threads each of its products
runs on follow from the work's size and the thread count alone, never from what other threads
are doing. BLAS's thread count is the process's, so a kernel changes it only inside a
:func:`blas_for` or :func:`one_blas_thread` region, which holds one lock from setting the count
to putting it back: a product never runs on a
count another kernel set, and outside the regions BLAS runs as the process set it. Every BLAS
call of the kernels runs inside such a region (code on pool threads runs inside its caller's).
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from spawnml.threads import intra_op_threads

from . import workers

#: Parts per thread: more than one, so a thread that is kept waiting holds up little work.
PARTS_PER_THREAD = 2
#: The least work (in GEMM multiply-adds) worth splitting: below it, handing parts over costs more.
MIN_SPLIT_WORK = 4_000_000
#: The least matrix product work (multiply-adds) that BLAS may spread over its threads: from there
#: on its own threads, which spin between products, beat parts handed to sleeping pool threads
#: (measured on MiniLM's products; docs/performance.md).
BLAS_THREADS_WORK = 4_000_000
#: The least im2col convolution work (multiply-adds an image) split over threads: below it the
#: parts cost more to hand over than they save.
MIN_SPLIT_PRODUCT = 16_000_000
#: The least depthwise convolution work (outputs times kernel taps) split over threads: MobileNetV2's
#: layers (up to 4M) ran slower cut, as handing parts over costs about as long as one of them.
MIN_SPLIT_DEPTHWISE = 8_000_000

#: Held by a kernel from setting BLAS's thread count to putting it back (see the module's docstring).
#: Reentrant, as a region may enter another (a matrix product inside a convolution's region).
_blas_lock = threading.RLock()


@functools.cache
def _blas() -> Any | None:
    """threadpoolctl's controller of numpy's BLAS, or None where it finds none to control.

    A process may hold several BLAS libraries (scipy's wheel brings its own OpenBLAS, and numba
    imports scipy): the one numpy's wheel ships, next to or inside the numpy package, comes first.
    """
    import numpy as np
    from threadpoolctl import ThreadpoolController

    package = Path(np.__file__).resolve().parent
    homes = (package, package.parent / "numpy.libs")

    def numpy_ships(controller: Any) -> bool:
        path = Path(controller.filepath).resolve()
        return any(path.is_relative_to(home) for home in homes)

    controllers = ThreadpoolController().select(user_api="blas").lib_controllers
    return max(controllers, key=numpy_ships, default=None)


#: OpenBLAS's setter of its thread count, by the names numpy's and scipy's wheels give it.
_OPENBLAS_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads",
)
#: Its getter, by the same names.
_OPENBLAS_GETTERS = tuple(name.replace("_set_", "_get_") for name in _OPENBLAS_SETTERS)


@functools.cache
def _get_blas_threads() -> Callable[[], int]:
    """Numpy's BLAS thread count, read directly: threadpoolctl's getter looks its symbol up on
    every call, which costs more than a one-row product."""
    blas = _blas()
    assert blas is not None
    if blas.internal_api == "openblas":
        for name in _OPENBLAS_GETTERS:
            getter = getattr(blas.dynlib, name, None)
            if getter is not None:
                return typing.cast(Callable[[], int], getter)
    return typing.cast(Callable[[], int], blas.get_num_threads)


@functools.cache
def _set_blas_threads() -> Callable[[int], object]:
    """Sets numpy's BLAS thread count from any thread. threadpoolctl's setter leaves OpenBLAS's
    count as it is when called from another thread than the first that set it, and kernels run
    on the caller's thread, whichever it is; the kernels' regions serialise their changes."""
    blas = _blas()
    assert blas is not None
    if blas.internal_api == "openblas":
        for name in _OPENBLAS_SETTERS:
            setter = getattr(blas.dynlib, name, None)
            if setter is not None:
                return setter
    return blas.set_num_threads


def thread_count() -> int:
    """How many threads the kernels may use: the running session's ``intra_op_num_threads``, else
    :func:`default_thread_count`."""
    return intra_op_threads() or default_thread_count()


@functools.cache
def default_thread_count() -> int:
    """The backend's own count: the CPUs the process may run on when first asked (``os.cpu_count()``
    where the system cannot say which)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def part_count(work: int, limit: int, threads: int | None = None, least: int = MIN_SPLIT_WORK) -> int:
    """How many parts to cut ``work`` into for ``threads`` threads (:func:`thread_count` by
    default), at most ``limit``; 1 to run it whole, as below ``least``."""
    threads = thread_count() if threads is None else threads
    if threads == 1 or work < least:
        return 1
    return max(1, min(limit, threads * PARTS_PER_THREAD))


def spans(size: int, count: int) -> list[slice]:
    """``range(size)`` cut into ``count`` consecutive, nearly equal slices."""
    bounds = [size * index // count for index in range(count + 1)]
    return [slice(start, stop) for start, stop in itertools.pairwise(bounds)]


def run_spans(run: Callable[[slice], None], size: int, parts: int, threads: int) -> None:
    """``run`` over ``range(size)`` in ``parts`` spans (:func:`spans`) on ``threads`` threads, or
    over the whole range on the calling thread when ``parts`` is 1."""
    if parts == 1:
        run(slice(0, size))
    else:
        run_parts([functools.partial(run, span) for span in spans(size, parts)], threads)


def run_parts(parts: Sequence[Callable[[], None]], threads: int | None = None) -> None:
    """Run every part on the calling thread and the pool's, on ``threads`` threads in all
    (:func:`thread_count` by default); parts that call BLAS run inside :func:`one_blas_thread`."""
    threads = min(thread_count() if threads is None else threads, len(parts))
    pending = iter(parts)

    def drain() -> None:
        for part in pending:  # a list iterator hands each part to one thread only
            part()

    helpers = workers.pool(threads - 1).submit(drain, threads - 1) if threads > 1 else []
    try:
        drain()
    finally:
        for helper in helpers:
            if not helper.cancel():  # a helper the system has not run yet has nothing left to do
                helper.result()


def blas_for(work: int) -> _BlasThreads:
    """A region (a context manager) where BLAS runs on :func:`thread_count` threads for GEMMs of
    ``work`` multiply-adds in all from :data:`BLAS_THREADS_WORK` on, on one thread below it."""
    return _BlasThreads(None if work >= BLAS_THREADS_WORK else 1)


def one_blas_thread() -> _BlasThreads:
    """A region (a context manager) where BLAS runs on one thread."""
    return _BlasThreads(1)


class _BlasThreads:
    """A region with BLAS on ``count`` threads (None: :func:`thread_count`'s), holding the lock on
    the setting from setting it to putting it back. A class rather than a generator: it is entered
    around every matrix product and convolution, and a generator's context costs a microsecond more."""

    __slots__ = ("_count", "_held", "_restore")

    def __init__(self, count: int | None) -> None:
        self._count = count
        self._held = False
        #: The count to put back on leaving, where the region changed it.
        self._restore: int | None = None

    def __enter__(self) -> None:
        blas = _blas()
        if blas is None:
            return
        count = thread_count() if self._count is None else self._count
        _blas_lock.acquire()
        self._held = True
        try:
            current = _get_blas_threads()()
            if count != current:
                _set_blas_threads()(count)
                self._restore = current
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc: object) -> None:
        if not self._held:
            return
        try:
            if self._restore is not None:
                _set_blas_threads()(self._restore)
        finally:
            self._held, self._restore = False, None
            _blas_lock.release()
