"""The hostile corpus: every file built by code, each with the error it must be refused with.

A :class:`Hostile` writes its model (and any companion files) into a model folder and
returns the model's path. Files it means the loader never to read go into a sibling
``outside`` folder, so a test can check that nothing there was opened.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spawnml import SpawnMLError

#: Writes the hostile model into ``folder`` (the model's folder) and returns its path.
Build = Callable[[Path], Path]


@dataclass(frozen=True)
class Hostile:
    """One hostile file and the :class:`SpawnMLError` subclass it must be refused with."""

    name: str
    build: Build
    refused_with: type[SpawnMLError]


def outside(folder: Path) -> Path:
    """The folder beside the model's folder where files the loader must not touch live."""
    path = folder.parent / "outside"
    path.mkdir(exist_ok=True)
    return path


def corpus() -> list[Hostile]:
    """Every hostile file of every format."""
    from . import container_files, onnx_files, torch_files

    return [*onnx_files.HOSTILE, *container_files.HOSTILE, *torch_files.HOSTILE]
