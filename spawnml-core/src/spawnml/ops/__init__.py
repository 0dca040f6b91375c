"""The operator registry: which operators exist, and which each installed backend runs.

Schemas come from plugins through the ``register_operators`` hook (the loaded set is
:func:`spawnml.plugins.operators`); core's own ONNX schemas are registered by the built-in
plugin :mod:`spawnml.plugins.builtin`.
"""

from __future__ import annotations

from .registry import OperatorRegistry
from .schema import REQUIRED, Attribute, InferenceContext, OpSchema, TensorType

__all__ = [
    "REQUIRED",
    "Attribute",
    "InferenceContext",
    "OpSchema",
    "OperatorRegistry",
    "TensorType",
]
