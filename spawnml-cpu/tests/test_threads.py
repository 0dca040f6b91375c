"""Splitting a kernel's work over threads: every part runs once, errors reach the caller, and
BLAS is single-threaded while the parts run and as the caller set it afterwards."""

from __future__ import annotations

import threading

import pytest
from spawnml_cpu.kernels.threads import MIN_SPLIT_WORK, part_count, run_parts, thread_count
from threadpoolctl import threadpool_limits


def test_thread_count_follows_the_blas_setting():
    for threads in (1, 2):
        with threadpool_limits(threads, user_api="blas"):
            assert thread_count() == threads


def test_small_work_and_one_thread_are_never_split():
    with threadpool_limits(2, user_api="blas"):
        assert part_count(MIN_SPLIT_WORK - 1, limit=100) == 1
        assert part_count(MIN_SPLIT_WORK, limit=100) > 1
        assert part_count(MIN_SPLIT_WORK, limit=1) == 1
    with threadpool_limits(1, user_api="blas"):
        assert part_count(10 * MIN_SPLIT_WORK, limit=100) == 1


def test_every_part_runs_once_with_blas_on_one_thread():
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def part(index: int) -> None:
        with lock:
            seen.append((index, thread_count()))

    with threadpool_limits(2, user_api="blas"):
        run_parts([lambda index=index: part(index) for index in range(40)])
        assert thread_count() == 2
    assert sorted(index for index, _ in seen) == list(range(40))
    assert {threads for _, threads in seen} == {1}


def test_an_error_in_a_part_reaches_the_caller():
    def fail() -> None:
        raise ValueError("part failed")

    with threadpool_limits(2, user_api="blas"):
        with pytest.raises(ValueError, match="part failed"):
            run_parts([lambda: None, fail, lambda: None, lambda: None])
        assert thread_count() == 2
