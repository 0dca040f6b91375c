"""Short, derandomized fuzz runs of every loader and of feed checking; ``scripts/fuzz`` runs them long."""

from __future__ import annotations

import os

import numpy as np
import pytest
import spawnml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .cases import CASES, seed, valid_feed_runs
from .seeds import SEEDS

#: Examples per target in CI: a few seconds each.
EXAMPLES = int(os.environ.get("SPAWNML_FUZZ_EXAMPLES", "150"))


@pytest.mark.parametrize("target", SEEDS)
def test_seed_is_valid(target: str) -> None:
    graph = spawnml.load(seed(target))
    assert graph.nodes or graph.initializers


def test_feed_session_runs() -> None:
    np.testing.assert_array_equal(valid_feed_runs(), np.full((2, 3), 2, np.float32))


@pytest.mark.parametrize("target", CASES)
def test_fuzz(target: str) -> None:
    run = settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )(given(st.data())(CASES[target]))
    run()
