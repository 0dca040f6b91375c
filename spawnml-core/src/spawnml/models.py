"""What a model plugin registers: a named model port or task pipeline."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelSpec:
    """A model port or pipeline that ``spawnml models`` lists and ``spawnml.pipeline`` builds."""

    name: str
    task: str
    description: str
    create: Callable[..., Any]
    source: str = ""  # where its weights come from, for people

    def __call__(self, **kwargs: Any) -> Any:
        return self.create(**kwargs)
