"""The thread count a session gives its runs: set around each run, read by the backends' kernels.

A context variable rather than a process-wide setting, so that two sessions with different
``intra_op_num_threads`` run side by side, each on its own count, and a session never changes
what other code in the process (onnxruntime, numpy's own BLAS calls) runs on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .errors import InvalidArgumentError

#: 0: the session left the count to the backend (its default: every core it may use).
_INTRA_OP_THREADS: ContextVar[int] = ContextVar("spawnml_intra_op_threads", default=0)


def intra_op_threads() -> int:
    """The running session's ``intra_op_num_threads``; 0 where it leaves the choice to the backend."""
    return _INTRA_OP_THREADS.get()


def checked_thread_count(count: object, option: str = "intra_op_num_threads") -> int:
    """``count`` as a thread count (0 for the backend's default), or a clear error."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidArgumentError(
            f"{option} must be a whole number >= 0 (0: the backend's default), not {count!r}"
        )
    return count


@contextmanager
def intra_op(count: int) -> Iterator[None]:
    """Run what this context (this thread or task only) runs on ``count`` threads; 0 leaves the
    count of an enclosing context in force (the backend's default outside any), so that a
    session left at 0 runs on whatever count its caller set with ``intra_op``."""
    if count == 0:
        yield
        return
    token = _INTRA_OP_THREADS.set(count)
    try:
        yield
    finally:
        _INTRA_OP_THREADS.reset(token)
