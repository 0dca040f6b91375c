"""The CPU backend's threads: as many as the session's ``intra_op_num_threads``, else the CPUs the
process may use, whatever BLAS is set to; split loops run every part once and pass errors on; BLAS
runs on one thread for small GEMMs and on the backend's count otherwise, and is put back afterwards;
the pool threads keep off the caller's CPU, and OpenBLAS's are never moved."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Any

import pytest
from spawnml.threads import intra_op
from spawnml_cpu.kernels import workers
from spawnml_cpu.kernels.threads import (
    BLAS_THREADS_WORK,
    MIN_SPLIT_WORK,
    _blas,
    blas_for,
    one_blas_thread,
    part_count,
    run_parts,
    thread_count,
)
from threadpoolctl import threadpool_limits


def test_thread_count_follows_the_session_not_blas():
    for threads in (1, 2, 5):
        with intra_op(threads):
            assert thread_count() == threads
    for blas_threads in (1, 3):
        with threadpool_limits(blas_threads, user_api="blas"):
            assert thread_count() == len(os.sched_getaffinity(0))


def test_small_work_and_one_thread_are_never_split():
    with intra_op(2):
        assert part_count(MIN_SPLIT_WORK - 1, limit=100) == 1
        assert part_count(MIN_SPLIT_WORK, limit=100) > 1
        assert part_count(MIN_SPLIT_WORK, limit=1) == 1
    with intra_op(1):
        assert part_count(10 * MIN_SPLIT_WORK, limit=100) == 1


def test_every_part_runs_once_on_the_threads():
    seen: list[tuple[int, str]] = []
    lock = threading.Lock()

    def part(index: int) -> None:
        with lock:
            seen.append((index, threading.current_thread().name))

    with intra_op(2):
        run_parts([lambda index=index: part(index) for index in range(40)])
    assert sorted(index for index, _ in seen) == list(range(40))


@pytest.mark.parametrize("threads", [1, 2])
def test_one_part_runs_on_the_calling_thread(threads):
    seen: list[str] = []
    with intra_op(threads):
        run_parts([lambda: seen.append(threading.current_thread().name)])
    assert seen == [threading.current_thread().name]


def test_one_thread_hands_nothing_to_the_pool(monkeypatch):
    submitted: list[int] = []
    monkeypatch.setattr(workers.Workers, "submit", lambda self, fn, copies: submitted.append(copies) or [])
    seen: list[str] = []
    with intra_op(1):
        run_parts([lambda: seen.append(threading.current_thread().name)] * 8)
    assert submitted == [] and set(seen) == {threading.current_thread().name}


def test_an_error_in_a_part_reaches_the_caller():
    def fail() -> None:
        raise ValueError("part failed")

    with intra_op(2), pytest.raises(ValueError, match="part failed"):
        run_parts([lambda: None, fail, lambda: None, lambda: None])


def blas() -> Any:
    """threadpoolctl's controller of numpy's BLAS (these tests need one)."""
    controller = _blas()
    assert controller is not None
    return controller


def blas_threads() -> int:
    """BLAS's thread count as it is set now."""
    return int(blas().get_num_threads())


@pytest.mark.parametrize("outside", [1, 3])
def test_blas_runs_on_the_sessions_count_in_regions_and_as_the_process_set_it_outside(outside):
    with threadpool_limits(outside, user_api="blas"), intra_op(2):
        with blas_for(BLAS_THREADS_WORK - 1):
            assert blas_threads() == 1
        assert blas_threads() == outside
        with blas_for(BLAS_THREADS_WORK):
            assert blas_threads() == 2
        assert blas_threads() == outside
        with pytest.raises(ValueError), blas_for(BLAS_THREADS_WORK):
            raise ValueError("in a GEMM")
        assert blas_threads() == outside


def test_one_blas_thread_whatever_the_work_and_put_back():
    with threadpool_limits(2, user_api="blas"):
        with one_blas_thread():
            assert blas_threads() == 1
        assert blas_threads() == 2
    with threadpool_limits(1, user_api="blas"), one_blas_thread():
        assert blas_threads() == 1


def test_regions_nest():
    with threadpool_limits(3, user_api="blas"):
        with intra_op(2), one_blas_thread():
            assert thread_count() == 2
            with blas_for(BLAS_THREADS_WORK):
                assert blas_threads() == 2
            assert blas_threads() == 1
        assert blas_threads() == 3


def test_a_product_never_runs_on_the_count_another_thread_set():
    """While one thread's kernel holds BLAS on one thread, another's large product waits for it,
    then runs on its own session's count."""
    entered, seen = threading.Event(), []

    def hold_one_thread() -> None:
        with one_blas_thread():
            entered.set()
            time.sleep(0.2)
            seen.append(("held", blas_threads()))

    with intra_op(2):
        holder = threading.Thread(target=hold_one_thread)
        holder.start()
        entered.wait()
        with blas_for(BLAS_THREADS_WORK):
            seen.append(("product", blas_threads()))
        holder.join()
    assert seen == [("held", 1), ("product", 2)]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="steering needs two CPUs to choose from")
def test_pool_threads_are_kept_off_the_callers_cpu():
    """The caller is held to one CPU, then to another: the pool thread follows, each time to every
    CPU it may use but the caller's."""
    allowed = os.sched_getaffinity(0)
    first, second = sorted(allowed)[:2]
    pool = workers.pool(1)
    for done in pool.submit(lambda: None, 1):  # the thread starts with the process's CPUs
        done.result()
    try:
        for cpu in (first, second):
            os.sched_setaffinity(0, {cpu})
            for done in pool.submit(lambda: None, 1):
                done.result()
            assert all(os.sched_getaffinity(ident) == allowed - {cpu} for ident in pool._native_ids)
    finally:
        os.sched_setaffinity(0, allowed)


def _openblas_thread_cpus(index: int) -> set[int]:
    """The CPUs OpenBLAS's thread ``index`` may run on, as OpenBLAS reports them."""
    getaffinity = blas().dynlib.openblas_getaffinity
    getaffinity.argtypes = (ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p)
    mask = ctypes.create_string_buffer(128)
    assert getaffinity(index, len(mask), mask) == 0
    bits = int.from_bytes(mask.raw, "little")
    return {cpu for cpu in range(bits.bit_length()) if bits >> cpu & 1}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a move needs two CPUs to choose from")
@pytest.mark.skipif(
    _blas() is None or (blas().internal_api, blas().threading_layer) != ("openblas", "pthreads"),
    reason="reads OpenBLAS's own threads",
)
def test_openblas_threads_are_never_moved():
    """Products on BLAS's threads, the caller held to one CPU then another: OpenBLAS's other
    thread keeps the CPUs it had, inside the product's region and after it."""
    allowed = os.sched_getaffinity(0)
    try:
        with threadpool_limits(2, user_api="blas"), intra_op(2):
            before = _openblas_thread_cpus(0)
            for cpu in sorted(allowed)[:2]:
                os.sched_setaffinity(0, {cpu})
                with blas_for(BLAS_THREADS_WORK):
                    assert _openblas_thread_cpus(0) == before
                assert _openblas_thread_cpus(0) == before
    finally:
        os.sched_setaffinity(0, allowed)
