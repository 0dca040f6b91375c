"""How the CPU kernels use the cores: the compiled loops split over threads, BLAS where it pays.

The backend uses as many threads as numpy's BLAS is set to (``threadpoolctl.threadpool_limits``
sets it; onnxruntime's ``intra_op_num_threads`` is the counterpart). The rules, from
measurements on two cores shared with other processes:

- Large work (GGUF's quantized products, on a compiled loop that runs without the GIL) is
  cut into parts that the calling thread and pool threads take one at a time. A thread that
  the system keeps waiting only delays the part it took: the others take what is left, and
  one that has not started yet is not waited for.
- Matrix products (:func:`.nn_common.matmul`: MatMul, Gemm, attention, the integer and
  recurrent ones, GGUF's dequantized weights; 1x1 convolutions and those by kernel tap) from
  :data:`BLAS_THREADS_WORK` multiply-adds on run on BLAS's own threads, which spin between
  products, so that handing one over costs a few microseconds (they are kept off the caller's
  CPU, see :mod:`.workers`); smaller ones run on one BLAS thread, or for float32 1x1
  convolutions on the register-tiled loop of :mod:`.tiles` (as all of those do on one thread).
- The other convolutions' GEMMs run on one BLAS thread each. Those from
  :data:`MIN_SPLIT_PRODUCT` multiply-adds an image on are cut instead into spans of output rows
  that the threads take as the loops' parts are, so that the im2col copies run on every thread
  too; depthwise ones from :data:`MIN_SPLIT_DEPTHWISE` into spans of channels.
- Elementwise passes are not cut: on this machine a fused chain over 2.5M elements ran 1.50 ms
  whole and 1.33 ms in four parts on two threads (memory bound), and slower cut below that.

Matrix-vector products run on one BLAS thread whatever their size, so that equal weights give
equal outputs on any thread count (see :func:`.nn_common.matmul`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import workers

#: Parts per thread: more than one, so a thread that is kept waiting holds up little work.
PARTS_PER_THREAD = 2
#: The least work (in GEMM multiply-adds) worth splitting: below it, handing parts over costs more.
MIN_SPLIT_WORK = 4_000_000
#: The least matrix product work (multiply-adds) that BLAS may spread over its threads. MiniLM
#: batch 1's products on two threads took 18.8 ms a run on BLAS's threads from 5M on, against
#: 22.7 ms cut into parts on the pool threads and 35 ms on one thread: handing a part to a
#: sleeping pool thread costs 10-100 us, and OpenBLAS's threads spin between products.
BLAS_THREADS_WORK = 4_000_000
#: The least im2col convolution work (multiply-adds an image) split over threads: the parts cost
#: about 50 us more in all.
MIN_SPLIT_PRODUCT = 16_000_000
#: The least depthwise convolution work (outputs times kernel taps) split over threads: MobileNetV2's
#: layers (up to 4M) ran slower cut, as handing parts over costs about as long as one of them.
MIN_SPLIT_DEPTHWISE = 8_000_000

_blas_lock = threading.Lock()


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


def thread_count() -> int:
    """How many threads the kernels may use: numpy's BLAS thread count (1 where it is unknown)."""
    blas = _blas()
    return 1 if blas is None else max(1, blas.get_num_threads())


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


def blas_for(work: int) -> contextlib.AbstractContextManager[None]:
    """BLAS on the threads it is set to for GEMMs of ``work`` multiply-adds in all from
    :data:`BLAS_THREADS_WORK` on (its threads steered off the caller's CPU, see :mod:`.workers`),
    on one thread below it (a context manager). Not a generator, as it is entered around every
    matrix product and 1x1 convolution (see :class:`_OneBlasThread`)."""
    if work < BLAS_THREADS_WORK:
        return one_blas_thread()
    blas = _blas()
    if blas is not None:
        workers.keep_blas_threads_off(blas)
    return contextlib.nullcontext()


def one_blas_thread() -> _OneBlasThread:
    """BLAS on one thread meanwhile, then as it was (a context manager)."""
    return _OneBlasThread()


class _OneBlasThread:
    """:func:`one_blas_thread`'s context: holds the lock on the setting, the process's, so that one
    kernel at a time lowers it and puts it back. A class rather than a generator: it is entered
    around every convolution's GEMMs, and a generator's context costs a microsecond more."""

    __slots__ = ("_blas", "_threads")

    def __enter__(self) -> None:
        self._blas = blas = _blas()
        if blas is None:
            return
        _blas_lock.acquire()
        try:
            self._threads = blas.get_num_threads()
            if self._threads != 1:
                blas.set_num_threads(1)
        except BaseException:
            _blas_lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        if self._blas is None:
            return
        try:
            if self._threads != 1:
                self._blas.set_num_threads(self._threads)
        finally:
            _blas_lock.release()
