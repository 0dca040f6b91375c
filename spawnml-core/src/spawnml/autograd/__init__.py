"""Define-by-run automatic differentiation over the operator registry, with torch's semantics.

Operations on :class:`~spawnml.Tensor` run eagerly through the backend's kernel table
(:mod:`.dispatch`); those on tensors that require grad record a :class:`Function` node, and
``backward()`` walks the nodes back (:mod:`.engine`). Tensor methods and operators are the
functions of the same name (:mod:`.methods`).
"""

from __future__ import annotations

from . import methods
from .engine import backward
from .function import BackwardNode, Function
from .mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled

methods.install()

__all__ = [
    "BackwardNode",
    "Function",
    "backward",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
]
