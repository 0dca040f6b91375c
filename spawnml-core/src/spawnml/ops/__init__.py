"""The operator registry: which operators exist, and which each installed backend runs.

Schemas come from plugins through the ``register_operators`` hook; core's own ONNX
schemas are registered by the built-in plugin :mod:`spawnml.ops.builtin`.
"""

from __future__ import annotations

from .registry import OperatorRegistry
from .schema import REQUIRED, Attribute, InferenceContext, OpSchema, TensorType


def registry() -> OperatorRegistry:
    """The schemas every loaded plugin registered."""
    from ..plugins import operators

    return operators()


def native_operators(backend_name: str) -> set[tuple[str, str]]:
    """The ``(domain, op_type)`` pairs an installed backend has kernels for."""
    from ..plugins import backends

    return backends()[backend_name].kernels.ops()


__all__ = [
    "REQUIRED",
    "Attribute",
    "InferenceContext",
    "OpSchema",
    "OperatorRegistry",
    "TensorType",
    "native_operators",
    "registry",
]
