"""Building an IR graph node by node: unique value names, initializers, nodes, and undoing a step.

Every format lowering and model port that writes a graph itself (rather than reading one that
is already a graph) builds it through :class:`GraphBuilder`, so naming and rollback follow one
rule everywhere. A subclass chooses how unnamed outputs are called (:meth:`output_base`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .ir import Graph, Node

#: What :meth:`GraphBuilder.checkpoint` returns: node, initializer and taken-name counts.
Mark = tuple[int, int, int]


class GraphBuilder:
    """Nodes, initializers and unique value names of one graph under construction.

    ``reserved`` names are never handed out by :meth:`fresh` (a source format's own names that
    its tensors claim later with :meth:`claim`).
    """

    def __init__(self, graph: Graph, reserved: Iterable[str] = ()) -> None:
        self.graph = graph
        self._reserved = frozenset(reserved)
        self._used: set[str] = set()
        self._taken: list[str] = []  # in order, so that a rollback frees what a step took

    # -- names -------------------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        """An unused, unreserved value name: ``base``, else ``base_1``, ``base_2``, ..."""
        name, suffix = base or "t", 0
        while name in self._used or name in self._reserved:
            suffix += 1
            name = f"{base}_{suffix}"
        self._take(name)
        return name

    def claim(self, name: str) -> str:
        """``name`` itself (reserved or not) unless something already took it, else a fresh one."""
        if name in self._used:
            return self.fresh(name)
        self._take(name)
        return name

    def is_reserved(self, name: str) -> bool:
        return name in self._reserved

    def _take(self, name: str) -> None:
        self._used.add(name)
        self._taken.append(name)

    def output_base(self, op_type: str, inputs: list[str]) -> str:
        """The base of an unnamed node output's name: its first input and operator."""
        return f"{inputs[0] if inputs else op_type}_{op_type.lower()}"

    # -- values and nodes --------------------------------------------------------------------

    def initializer(self, value: np.ndarray, base: str = "", *, name: str = "") -> str:
        """Store ``value`` (C-ordered, its shape kept) under ``name`` (already claimed) or a fresh name."""
        name = name or self.fresh(base)
        self.graph.initializers[name] = np.asarray(value, order="C")
        return name

    def ints(self, values: Any, base: str) -> str:
        """An int64 initializer (shapes, axes, pads)."""
        return self.initializer(np.asarray(values, np.int64), base)

    def emit(
        self,
        op_type: str,
        inputs: list[str],
        attrs: dict[str, Any] | None = None,
        *,
        output: str = "",
        domain: str = "",
    ) -> str:
        """Append one node; its output is ``output`` (already claimed) or a fresh name."""
        output = output or self.fresh(self.output_base(op_type, inputs))
        self.add_node(op_type, inputs, [output], attrs, domain)
        return output

    def add_node(
        self,
        op_type: str,
        inputs: list[str],
        outputs: list[str],
        attrs: dict[str, Any] | None = None,
        domain: str = "",
        name: str = "",
    ) -> list[str]:
        """Append a node writing ``outputs`` (names already claimed), named ``name`` or after its
        first output."""
        name = name or (outputs[0] if outputs else op_type)
        self.graph.nodes.append(Node(op_type, list(inputs), list(outputs), dict(attrs or {}), name, domain))
        return outputs

    def wrote_last(self, name: str) -> bool:
        """Whether ``name`` is the one output of the node appended last."""
        nodes = self.graph.nodes
        return bool(nodes) and nodes[-1].outputs == [name]

    def rename_last(self, name: str) -> str:
        """Give the last node (of one output) the output and node name ``name`` (already claimed)."""
        node = self.graph.nodes[-1]
        node.outputs, node.name = [name], name
        return name

    # -- undoing a step ----------------------------------------------------------------------

    def checkpoint(self) -> Mark:
        """What :meth:`rollback` needs to undo the nodes, initializers and names added after it."""
        return len(self.graph.nodes), len(self.graph.initializers), len(self._taken)

    def rollback(self, mark: Mark) -> set[str]:
        """Undo everything added since ``mark``; returns the names it frees."""
        nodes, initializers, taken = mark
        del self.graph.nodes[nodes:]
        for name in list(self.graph.initializers)[initializers:]:
            del self.graph.initializers[name]
        freed = set(self._taken[taken:])
        del self._taken[taken:]
        self._used -= freed
        return freed
