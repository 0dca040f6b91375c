"""coremltools' generated protobuf modules for the Core ML specification, loaded on their own.

Importing ``coremltools`` runs its converters' set-up, which imports torch and TensorFlow when
they are installed (seconds, and their start-up logs). The generated ``*_pb2`` modules need only
protobuf, so they are loaded from coremltools' ``proto`` folder as a package of their own.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from functools import cache

from spawnml import ModelLoadError

#: The package name the generated modules are loaded under.
PACKAGE = "spawnml_formats.coreml._coremltools_proto"


_LOCK = threading.Lock()


@cache
def proto(name: str) -> types.ModuleType:
    """A generated module: ``Model_pb2`` (the ``Model`` message), ``MIL_pb2``, ``NeuralNetwork_pb2``."""
    with _LOCK:
        if PACKAGE not in sys.modules:
            spec = importlib.util.find_spec("coremltools")
            if spec is None or not spec.submodule_search_locations:
                raise ModelLoadError("reading Core ML models needs coremltools (pip install coremltools)")
            package = types.ModuleType(PACKAGE)
            package.__path__ = [f"{location}/proto" for location in spec.submodule_search_locations]
            sys.modules[PACKAGE] = package
        return importlib.import_module(f"{PACKAGE}.{name}")
