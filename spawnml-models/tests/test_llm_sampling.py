"""The sampler: greedy, seeded determinism, and the top-k / top-p masks against a numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
from spawnml import InvalidArgumentError
from spawnml_models.llm import Sampler
from spawnml_models.llm.sampling import probabilities

LOGITS = np.random.default_rng(1).normal(0, 2, 50)


def _reference(logits: np.ndarray, temperature: float, top_k: int, top_p: float) -> np.ndarray:
    """Sort once, keep the k best, then the shortest prefix whose mass reaches p, renormalise."""
    order = np.argsort(-logits, kind="stable")
    probs = np.exp(logits[order] / temperature - (logits[order] / temperature).max())
    keep = np.arange(len(logits)) < (top_k or len(logits))
    probs = np.where(keep, probs, 0) / np.where(keep, probs, 0).sum()
    keep &= np.arange(len(logits)) <= np.searchsorted(np.cumsum(probs), top_p)
    out = np.zeros(len(logits))
    out[order] = np.where(keep, probs, 0) / np.where(keep, probs, 0).sum()
    return out


def test_greedy_is_argmax() -> None:
    assert Sampler()(LOGITS) == int(np.argmax(LOGITS))


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p"), [(1.0, 0, 1.0), (0.7, 5, 1.0), (1.3, 0, 0.6), (0.9, 8, 0.5)]
)
def test_masks_match_reference(temperature: float, top_k: int, top_p: float) -> None:
    np.testing.assert_allclose(
        probabilities(LOGITS, temperature, top_k, top_p),
        _reference(LOGITS, temperature, top_k, top_p),
        atol=1e-12,
    )


def test_top_k_keeps_exactly_k() -> None:
    assert np.count_nonzero(probabilities(LOGITS, 1.0, top_k=7)) == 7


def test_seeded_sampling_is_deterministic_and_stays_in_the_nucleus() -> None:
    first, second = Sampler(0.8, 10, 0.9, seed=3), Sampler(0.8, 10, 0.9, seed=3)
    tokens = [first(LOGITS) for _ in range(200)]
    assert tokens == [second(LOGITS) for _ in range(200)]
    allowed = np.flatnonzero(probabilities(LOGITS, 0.8, 10, 0.9))
    assert set(tokens) <= set(allowed.tolist()) and len(set(tokens)) > 1
    other = Sampler(0.8, 10, 0.9, seed=4)
    assert tokens != [other(LOGITS) for _ in range(200)]


@pytest.mark.parametrize("options", [{"temperature": -1}, {"top_k": -2}, {"top_p": 0.0}, {"top_p": 1.5}])
def test_invalid_options_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(InvalidArgumentError):
        Sampler(**options)
