"""Core's ai.onnx operator schemas, one module per operator family."""

from __future__ import annotations

from ..schema import OpSchema
from . import elementwise, nn, reduce, tensor

SCHEMAS: list[OpSchema] = [
    *elementwise.SCHEMAS,
    *reduce.SCHEMAS,
    *tensor.SCHEMAS,
    *nn.SCHEMAS,
]
