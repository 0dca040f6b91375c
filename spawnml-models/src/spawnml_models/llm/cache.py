"""The key/value cache of a decoder graph: each run's present outputs become the next run's past."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from .graph import past_names, present_names


class CacheShape(Protocol):
    """What the cache reads of a decoder's configuration (a Llama or a Whisper one)."""

    @property
    def layers(self) -> int: ...

    @property
    def kv_heads(self) -> int: ...

    @property
    def head_dim(self) -> int: ...


class KVCache:
    """Past keys and values of every layer, kept as the session returned them (device tensors),
    so a backend's cache never travels to the host between decode steps."""

    def __init__(self, config: CacheShape, batch: int = 1) -> None:
        empty = np.zeros((batch, config.kv_heads, 0, config.head_dim), np.float32)
        self.layers = config.layers
        self.length = 0
        self._past: dict[str, Any] = {
            name: empty for layer in range(self.layers) for name in past_names(layer)
        }

    @property
    def output_names(self) -> list[str]:
        """The session outputs that update the cache, in the order :meth:`update` takes them."""
        return [name for layer in range(self.layers) for name in present_names(layer)]

    def feeds(self) -> dict[str, Any]:
        """The past inputs of the next run."""
        return dict(self._past)

    def update(self, presents: Sequence[Any], added: int) -> None:
        """Take the present outputs (in :attr:`output_names` order) of a run over ``added`` tokens."""
        past = [name for layer in range(self.layers) for name in past_names(layer)]
        self._past = dict(zip(past, presents, strict=True))
        self.length += added
