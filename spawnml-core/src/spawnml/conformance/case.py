"""What a conformance case is: a model, how to drive a session over it, and what it must give.

This module imports neither onnx nor onnxruntime, so the pytest plugin can name the
kinds of cases without loading them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import SpawnMLError

#: The kinds of the ONNX backend test cases, as ``onnx.backend.test.loader`` names them.
#: ``real`` holds the light real models shipped in ``onnx/backend/test/data/light``.
ONNX_KINDS = ("node", "simple", "pytorch-converted", "pytorch-operator", "real")
#: Operator property tests against onnxruntime.
PROPERTY_KIND = "property"
#: Reference models that plugins register, against onnxruntime.
MODEL_KIND = "model"
KINDS = (*ONNX_KINDS, PROPERTY_KIND, MODEL_KIND)

#: A model as a session takes it: serialized bytes, or a file.
ModelSource = bytes | Path
#: What a case's drive returns: for each run of the session, its outputs in order.
Runs = list[list[Any]]


class Session(Protocol):
    """The part of the session API that SpawnML and onnxruntime share."""

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any]) -> list[Any]: ...


class MissingModelError(SpawnMLError):
    """A case's model file is not on this machine; the case is skipped with this message."""


@dataclass(frozen=True)
class Case:
    """One conformance case.

    ``model`` gives the model (lazily: files are read when the case runs); ``drive`` runs a
    session over the case's inputs; ``expected`` gives the outputs the session must
    produce, or is None when onnxruntime's outputs on the same model are the reference.
    Outputs are compared within ``rtol`` / ``atol`` by :mod:`spawnml.conformance.compare`.
    A case with a ``skip`` reason is not run on any target.
    """

    name: str
    kind: str
    model: Callable[[], ModelSource]
    drive: Callable[[Session], Runs]
    expected: Callable[[], Runs] | None
    rtol: float
    atol: float
    skip: str = ""


def run_feeds(feeds: Callable[[], Sequence[Mapping[str, Any]]]) -> Callable[[Session], Runs]:
    """A drive that runs the session once per feed dict (made when the case runs)."""

    def drive(session: Session) -> Runs:
        return [list(session.run(None, dict(feed))) for feed in feeds()]

    return drive
