"""ONNX's protobuf messages (``ModelProto``, ``TensorProto``, ...), without onnx's package.

Importing ``onnx`` runs its ``__init__``, which imports ml_dtypes for its narrow float types:
most of a second, which would triple the start-up of a session on a float model. Reading a
file needs only the messages, so this module runs onnx's own generated module,
``onnx/onnx_ml_pb2.py``, from where onnx is installed. Its messages are the very classes
``onnx`` exposes once imported: protobuf keeps one class per message descriptor, and the
descriptors live in protobuf's default pool, which both share. Whatever needs onnx's
functions (the inliner, ``numpy_helper``, the checker, saving) imports onnx itself.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from spawnml import PluginError


def _generated() -> object:
    """onnx's ``onnx_ml_pb2``, executed under a private name so that onnx's own import of it is unaffected."""
    package = importlib.util.find_spec("onnx")  # finds the package without running its __init__
    if package is None or not package.submodule_search_locations:
        raise PluginError("the ONNX loader needs the onnx package: pip install onnx")
    path = Path(next(iter(package.submodule_search_locations))) / "onnx_ml_pb2.py"
    spec = importlib.util.spec_from_file_location(f"{__name__}._onnx_ml_pb2", path)
    if spec is None or spec.loader is None:
        raise PluginError(f"onnx's generated protobuf module is missing at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:
    from onnx import (
        AttributeProto,
        GraphProto,
        ModelProto,
        NodeProto,
        SparseTensorProto,
        TensorProto,
        TensorShapeProto,
        TypeProto,
        ValueInfoProto,
    )
else:
    _messages = _generated()
    AttributeProto = _messages.AttributeProto
    GraphProto = _messages.GraphProto
    ModelProto = _messages.ModelProto
    NodeProto = _messages.NodeProto
    SparseTensorProto = _messages.SparseTensorProto
    TensorProto = _messages.TensorProto
    TensorShapeProto = _messages.TensorShapeProto
    TypeProto = _messages.TypeProto
    ValueInfoProto = _messages.ValueInfoProto

__all__ = [
    "AttributeProto",
    "GraphProto",
    "ModelProto",
    "NodeProto",
    "SparseTensorProto",
    "TensorProto",
    "TensorShapeProto",
    "TypeProto",
    "ValueInfoProto",
]
