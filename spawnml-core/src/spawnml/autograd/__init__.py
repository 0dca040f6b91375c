"""Define-by-run automatic differentiation over the operator registry, with torch's semantics.

Operations on :class:`~spawnml.Tensor` run eagerly through the backend's kernel table
(:mod:`.dispatch`); those on tensors that require grad record a :class:`Function` node, and
``backward()`` walks the nodes back (:mod:`.engine`). Tensor methods and operators are the
functions of the same name (:mod:`.methods`). :func:`capture_step` records a fixed-shape training
step once and replays it without building the graph again (:mod:`.capture`).
"""

from __future__ import annotations

from . import methods
from .capture import CapturedStep, CaptureError, capture_step
from .engine import backward
from .function import BackwardNode, Function
from .mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled

methods.register()

__all__ = [
    "BackwardNode",
    "CaptureError",
    "CapturedStep",
    "Function",
    "backward",
    "capture_step",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
]
