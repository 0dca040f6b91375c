"""Choosing the next token from logits: greedy, or sampled with temperature, top-k and top-p."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from spawnml import InvalidArgumentError


@dataclass
class Sampler:
    """Picks one token id from a row of logits.

    ``temperature == 0`` is greedy (argmax). Otherwise the logits are divided by the
    temperature, restricted to the ``top_k`` most likely tokens (0: all) and to the smallest set
    whose probability reaches ``top_p`` (1: all), and sampled with a generator seeded by ``seed``.
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    _rng: np.random.Generator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise InvalidArgumentError(f"temperature must be at least 0, not {self.temperature}")
        if self.top_k < 0:
            raise InvalidArgumentError(f"top_k must be at least 0, not {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise InvalidArgumentError(f"top_p must be in (0, 1], not {self.top_p}")
        self._rng = np.random.default_rng(self.seed)

    def __call__(self, logits: np.ndarray) -> int:
        """The next token id for the 1-D ``logits``."""
        if self.temperature == 0:
            return int(np.argmax(logits))
        probs = probabilities(logits, self.temperature, self.top_k, self.top_p)
        return int(self._rng.choice(len(probs), p=probs))


def probabilities(logits: np.ndarray, temperature: float, top_k: int = 0, top_p: float = 1.0) -> np.ndarray:
    """The distribution sampled from: softmax of ``logits / temperature`` with the tokens outside
    the top-k and the top-p nucleus at probability 0, renormalised."""
    scaled = np.asarray(logits, np.float64) / temperature
    if 0 < top_k < len(scaled):
        scaled = np.where(scaled >= np.partition(scaled, -top_k)[-top_k], scaled, -np.inf)
    probs = np.exp(scaled - scaled.max())
    probs /= probs.sum()
    if top_p < 1:
        order = np.argsort(-probs, kind="stable")
        before = np.cumsum(probs[order]) - probs[order]  # mass of the more likely tokens
        probs[order[before >= top_p]] = 0
        probs /= probs.sum()
    return probs
