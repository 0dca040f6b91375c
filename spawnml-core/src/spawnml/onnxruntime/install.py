"""Make ``import onnxruntime`` resolve to :mod:`spawnml.onnxruntime` in this process.

The package and its ``capi`` modules are entered in ``sys.modules`` under onnxruntime's
names, and a meta-path finder maps any other ``onnxruntime.X`` to ``spawnml.onnxruntime.X``
(refusing names this package does not have). Modules that imported the real onnxruntime
before :func:`install` keep their reference to it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

PACKAGE = "onnxruntime"
#: The modules applications import, entered eagerly.
MODULES = (
    "onnxruntime",
    "onnxruntime.capi",
    "onnxruntime.capi._pybind_state",
    "onnxruntime.capi.onnxruntime_pybind11_state",
    "onnxruntime.capi.onnxruntime_inference_collection",
)


def _ours(name: str) -> str:
    return f"spawnml.{name}"


def _is_ort(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``onnxruntime.X`` as ``spawnml.onnxruntime.X``."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not _is_ort(fullname):
            return None
        if importlib.util.find_spec(_ours(fullname)) is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (spawnml.onnxruntime has no such module)", name=fullname
            )
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(_ours(spec.name))

    def exec_module(self, module: ModuleType) -> None:
        """The module was imported under its own name already."""


_finder = _Finder()


def install() -> None:
    """Route ``import onnxruntime`` (and its submodules) to SpawnML for this process."""
    for name in [name for name in sys.modules if _is_ort(name)]:
        del sys.modules[name]  # a real onnxruntime imported earlier must not answer later imports
    for name in MODULES:
        sys.modules[name] = importlib.import_module(_ours(name))
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    """Undo :func:`install`: the next ``import onnxruntime`` finds the real one, if installed."""
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    for name in [name for name in sys.modules if _is_ort(name)]:
        if sys.modules[name].__name__.startswith("spawnml."):
            del sys.modules[name]


def installed() -> bool:
    return _finder in sys.meta_path
