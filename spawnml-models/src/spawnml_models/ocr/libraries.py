"""OpenCV and pyclipper, imported when the OCR pipeline first processes an image.

Registering the pipeline must not load them, and a missing one is reported with the extra
that installs both: ``pip install "spawnml-models[ocr]"``.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

from spawnml import InvalidArgumentError

EXTRA = 'pip install "spawnml-models[ocr]"'


@functools.cache
def _required(module: str, package: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise InvalidArgumentError(f"the OCR pipeline needs {package} ({EXTRA}): {error}") from error


def opencv() -> ModuleType:
    """The ``cv2`` module (OpenCV's image processing)."""
    return _required("cv2", "OpenCV")


def clipper() -> ModuleType:
    """The ``pyclipper`` module (polygon offsetting)."""
    return _required("pyclipper", "pyclipper")
