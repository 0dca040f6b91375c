"""Soak: many runs with varying shapes keep resident memory flat after warm-up.

CI runs the short counts; ``SPAWNML_SOAK_FULL=1`` runs 10,000 small-model and 500 MiniLM runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import partial

import numpy as np
import pytest
import spawnml
from spawnml_models.assets import asset_file
from spawnml_models.embeddings import MODEL_ASSET
from spawnml_models.synthetic import token_batch

from tests.fuzz.seeds import onnx_seed
from tests.model_files import require

FULL = os.environ.get("SPAWNML_SOAK_FULL") == "1"
MIB = 1 << 20
#: Growth of resident memory allowed between the end of warm-up and the last run.
GROWTH_BOUND = 16 * MIB


def resident() -> int:
    """This process's resident memory in bytes, from /proc/self/statm."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def soak(session: spawnml.InferenceSession, feeds: Iterator[dict], runs: int, warm_up: int) -> int:
    """Run ``runs`` times; the growth of resident memory after the first ``warm_up`` runs."""
    baseline = 0
    for run in range(runs):
        if run == warm_up:
            baseline = resident()
        session.run(None, next(feeds))
    return resident() - baseline


def small_feeds() -> Iterator[dict]:
    rng = np.random.default_rng(0)
    while True:
        yield {"x": rng.standard_normal((int(rng.integers(1, 65)), 4)).astype(np.float32)}


def minilm_feeds(longest: int) -> Iterator[dict]:
    rng = np.random.default_rng(1)
    while True:
        yield token_batch(rng, rng.integers(3, longest + 1, rng.integers(1, 5)).tolist())


@pytest.mark.slow
def test_small_model_memory_is_flat() -> None:
    growth = soak(spawnml.InferenceSession(onnx_seed()), small_feeds(), 10_000 if FULL else 2_000, 200)
    assert growth < GROWTH_BOUND, f"resident memory grew {growth / MIB:.1f} MiB"


@pytest.mark.slow
@pytest.mark.real_model
def test_minilm_memory_is_flat() -> None:
    session = spawnml.InferenceSession(require(partial(asset_file, MODEL_ASSET, "model.onnx")))
    feeds = minilm_feeds(128 if FULL else 32)
    growth = soak(session, feeds, 500 if FULL else 40, 10)
    assert growth < GROWTH_BOUND, f"resident memory grew {growth / MIB:.1f} MiB"
