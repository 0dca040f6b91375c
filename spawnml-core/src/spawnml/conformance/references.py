"""Reference models: real model files that plugins register, run on a backend and on onnxruntime.

Each :class:`~spawnml.models.ReferenceModel` becomes one case: its ``drive`` runs a
SpawnML session on the backend and an onnxruntime session on the same file, and the two
lists of outputs are compared within the model's ``rtol`` / ``atol``. A model whose file
is not on this machine is skipped with the reason.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SpawnMLError
from ..models import ReferenceModel
from .case import MODEL_KIND, Case, MissingModelError, Runs, Session


def reference_cases() -> list[Case]:
    """One case per reference model the installed plugins register, by name."""
    from ..plugins import registry

    models = registry().reference_models
    return [reference_case(models[name]) for name in sorted(models)]


def reference_case(model: ReferenceModel) -> Case:
    def drive(session: Session) -> Runs:
        return [list(model.drive(session))]

    return Case(model.name, MODEL_KIND, lambda: locate(model), drive, None, model.rtol, model.atol)


def locate(model: ReferenceModel) -> Path:
    """The model's file; :class:`MissingModelError` when it is not on this machine."""
    try:
        path = Path(model.path())
    except (OSError, SpawnMLError) as error:
        raise MissingModelError(f"reference model {model.name!r}: {error}") from error
    if not path.is_file():
        raise MissingModelError(f"reference model {model.name!r}: {path} does not exist")
    return path
