"""What a fuzzed input may do: succeed, or raise a :class:`spawnml.SpawnMLError`; nothing else.

Each check runs under a wall-clock guard, so a hang surfaces as :class:`Hang` rather than a
stuck run. Any other exception propagates for hypothesis to shrink and report, carrying the input that
raised it as ``fuzz_input`` (bytes).
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import spawnml
from spawnml import SpawnMLError

#: Executions per target, for the long run's figures.
EXECUTIONS: Counter[str] = Counter()


class Hang(Exception):
    """An input kept a loader or session busy past the guard."""


@contextmanager
def guard(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in the main thread after ``seconds``."""

    def expire(signum: int, frame: Any) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_load(target: str, data: bytes, seconds: float = 10.0) -> None:
    """Load ``data`` and plan a session on it; only success or a SpawnMLError is allowed."""
    EXECUTIONS[target] += 1
    with guard(seconds):
        try:
            graph = spawnml.load(data)
            if graph.nodes:
                spawnml.InferenceSession(graph)
        except SpawnMLError:
            pass
        except Exception as error:
            error.fuzz_input = data
            raise


def check_feed(session: spawnml.InferenceSession, feeds: dict[str, Any], seconds: float = 10.0) -> None:
    """Run ``session`` on ``feeds``; a wrong name, dtype or shape must raise a SpawnMLError."""
    EXECUTIONS["feeds"] += 1
    with guard(seconds):
        try:
            outputs = session.run(None, feeds)
        except SpawnMLError:
            return
        except Exception as error:
            error.fuzz_input = repr(feeds).encode()
            raise
    assert all(isinstance(output, np.ndarray) for output in outputs)
