"""coremltools' generated protobuf modules for the Core ML specification, without coremltools.

Importing ``coremltools`` runs its converters' set-up, which imports torch and TensorFlow when
they are installed (seconds, and their start-up logs). The generated ``*_pb2`` modules need only
protobuf, so ``coremltools.proto`` is imported under its own name with a stand-in parent
package that is removed again at once. The modules must keep that name: protobuf registers each
``.proto`` file once per process, and a second copy under another name (which a later
``import coremltools`` would load) crashes the protobuf runtime. A later ``import coremltools``
runs the real package, which finds ``coremltools.proto`` already imported and uses it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from functools import cache

from spawnml import ModelLoadError

PARENT = "coremltools"
PACKAGE = f"{PARENT}.proto"

_LOCK = threading.Lock()


@cache
def proto(name: str) -> types.ModuleType:
    """A generated module: ``Model_pb2`` (the ``Model`` message), ``MIL_pb2``, ``NeuralNetwork_pb2``."""
    with _LOCK:
        if PACKAGE not in sys.modules and PARENT not in sys.modules:
            _import_protos_alone()
        return importlib.import_module(f"{PACKAGE}.{name}")


def _import_protos_alone() -> None:
    spec = importlib.util.find_spec(PARENT)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("reading Core ML models needs coremltools (pip install coremltools)")
    stand_in = types.ModuleType(PARENT)
    stand_in.__path__ = list(spec.submodule_search_locations)
    sys.modules[PARENT] = stand_in
    try:
        importlib.import_module(PACKAGE)
    finally:
        del sys.modules[PARENT]
