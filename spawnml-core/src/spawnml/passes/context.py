"""What a rewrite pass may ask about: operator schemas, the providers that will run the graph."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..backend import Backend
from ..errors import SpawnMLError
from ..ir import Graph, Node
from ..ops.registry import OperatorRegistry
from ..ops.schema import TensorType
from .shape_inference import InferenceMemo, infer_shapes

#: onnxruntime's contrib operator domain, imported when a fusion introduces one of its operators.
MS_DOMAIN = "com.microsoft"


@dataclass
class PassContext:
    """Operators and providers; a fused node is only introduced where some provider runs it.

    For a subgraph body, ``outer`` holds the constants and ``outer_types`` the known types of
    the enclosing scopes' values, by name.
    """

    operators: OperatorRegistry
    providers: Sequence[Backend] = field(default_factory=list)
    outer: Mapping[str, np.ndarray] = field(default_factory=dict)
    outer_types: Mapping[str, TensorType] = field(default_factory=dict)
    #: What inferring the graph found node by node, kept across its rewrites.
    memo: InferenceMemo = field(default_factory=InferenceMemo, repr=False)
    _types: dict[str, TensorType] | None = field(default=None, repr=False)

    def placement(self, graph: Graph, node: Node) -> Backend | None:
        """The provider the planner would give ``node``: the first that runs it, if any."""
        opset = graph.opset(node.domain)
        if self.operators.lookup(node.domain, node.op_type, opset) is None:
            return None
        return next(
            (backend for backend in self.providers if backend.unsupported_reason(node, opset) is None), None
        )

    def may_replace(self, graph: Graph, originals: Sequence[Node], fused: Node) -> bool:
        """Whether ``fused`` runs on the one provider all ``originals`` would run on (as in
        onnxruntime, nodes of different providers are never fused together)."""
        provider = self.placement(graph, fused)
        return provider is not None and all(self.placement(graph, node) is provider for node in originals)

    def types(self, graph: Graph) -> dict[str, TensorType]:
        """Inferred types of ``graph``'s values (empty when inference fails), kept until :meth:`changed`."""
        if self._types is None:
            try:
                self._types = infer_shapes(graph, self.operators, self.outer_types, self.memo)
            except SpawnMLError:
                self._types = {}
        return self._types

    def changed(self) -> None:
        """Forget the inferred types: a pass rewrote the graph."""
        self._types = None


def import_domain(graph: Graph, domain: str, version: int = 1) -> None:
    """Make sure ``graph`` imports ``domain`` (for a contrib operator a fusion introduced)."""
    graph.opset_imports.setdefault(domain, version)
