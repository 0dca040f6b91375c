"""The intra-op thread count a session hands its runs: set per context, 0 keeping the enclosing one."""

from __future__ import annotations

import threading

import pytest
from spawnml.errors import InvalidArgumentError
from spawnml.threads import checked_thread_count, intra_op, intra_op_threads


def test_counts_nest_and_zero_keeps_the_enclosing_count():
    assert intra_op_threads() == 0
    with intra_op(2):
        assert intra_op_threads() == 2
        with intra_op(0):  # a session left at its default inside a caller's count
            assert intra_op_threads() == 2
        with intra_op(1):
            assert intra_op_threads() == 1
        assert intra_op_threads() == 2
    assert intra_op_threads() == 0


def test_a_count_holds_for_its_own_thread_only():
    seen: list[int] = []
    with intra_op(3):
        worker = threading.Thread(target=lambda: seen.append(intra_op_threads()))
        worker.start()
        worker.join()
    assert seen == [0]


@pytest.mark.parametrize("count", [-1, 1.5, "2", True, None])
def test_bad_counts_are_refused(count):
    with pytest.raises(InvalidArgumentError, match="intra_op_num_threads must be a whole number"):
        checked_thread_count(count)
