"""What a model plugin registers: model ports and pipelines, and reference models."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
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


@dataclass(frozen=True)
class ReferenceModel:
    """A real model file the conformance kit runs on every backend against onnxruntime.

    ``drive`` receives a session (SpawnML's or onnxruntime's: they share the API), runs it
    over several inputs (varying shapes, carried state) and returns every output array in
    order; the kit compares the two lists within ``rtol`` / ``atol``.
    """

    name: str
    path: Callable[[], Path]
    drive: Callable[[Any], list[Any]]
    rtol: float = 1e-4
    atol: float = 1e-5
    description: str = ""
