"""The graph IR every format loader produces and every pass, planner and backend consumes.

A :class:`Graph` is a list of :class:`Node` objects in any order, wired by value names,
with typed :class:`Value` inputs and outputs, constant ``initializers`` held as numpy
arrays, and the operator-set versions it was written against. Control-flow operators
(If, Loop, Scan) carry their bodies as :class:`Graph` attributes; a body may read names
of the graphs that enclose it. A stateful graph declares its :class:`State`: values a
session keeps between runs, read from a graph input and written to a graph output.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InvalidGraphError

#: A dimension: a known size, a symbolic name shared between values, or unknown (None).
Dim = int | str | None
#: A shape: a tuple of dims, or None when even the rank is unknown.
Shape = tuple[Dim, ...] | None

DEFAULT_DOMAIN = ""  # the ai.onnx operator set

#: The kinds of value: a tensor, a sequence of tensors, or an optional (present or empty).
TENSOR, SEQUENCE, OPTIONAL = "tensor", "sequence", "optional"


@dataclass
class Value:
    """A named value of the graph.

    A tensor has an element type and a (possibly symbolic) shape. A sequence or an
    optional has neither; ``element`` describes what it holds, as a nameless value.
    """

    name: str
    dtype: np.dtype | None = None
    shape: Shape = None
    kind: str = TENSOR
    element: Value | None = None  # of a sequence or optional, when declared

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)


@dataclass(eq=False)
class Node:
    """One operator application. An empty input name marks an omitted optional input.

    Nodes compare by identity: two applications of an operator are distinct even when alike
    (and finding one in a node list does not compare every field of the others).
    """

    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    domain: str = DEFAULT_DOMAIN

    def subgraphs(self) -> list[Graph]:
        """The graphs held in this node's attributes (If branches, Loop and Scan bodies).

        An attribute list holds one type, as in ONNX: it holds graphs when its first item is one.
        """
        found = []
        for value in self.attrs.values():
            if isinstance(value, list):  # most attributes of most nodes hold numbers
                if value and isinstance(value[0], Graph):
                    found += value
            elif isinstance(value, Graph):
                found.append(value)
        return found

    def label(self) -> str:
        """A name for messages: the node's name, or its type and first output."""
        return self.name or f"{self.op_type}->{self.outputs[0] if self.outputs else '?'}"


@dataclass(frozen=True)
class State:
    """A value a session keeps between runs (a TFLite resource variable, a recurrent state).

    Each run reads it from the graph input ``input`` and writes its next value to the graph
    output ``output``; the first run after loading (or after a reset) reads ``initial``.
    """

    name: str
    input: str
    output: str
    initial: np.ndarray


@dataclass
class Graph:
    """A computation: nodes, typed inputs and outputs, initializers and opset imports."""

    nodes: list[Node] = field(default_factory=list)
    inputs: list[Value] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    value_info: dict[str, Value] = field(default_factory=dict)
    opset_imports: dict[str, int] = field(default_factory=dict)
    name: str = "graph"
    metadata: dict[str, str] = field(default_factory=dict)
    #: State kept between runs; its inputs and outputs are among ``inputs`` and ``outputs``.
    states: list[State] = field(default_factory=list)
    #: Whether :meth:`free_names` keeps its answer, and the answer kept (see :meth:`remember_free_names`).
    _remember: bool = field(default=False, init=False, repr=False, compare=False)
    _free_names: frozenset[str] | None = field(default=None, init=False, repr=False, compare=False)

    def opset(self, domain: str = DEFAULT_DOMAIN) -> int:
        """The imported version of an operator set (``""`` and ``ai.onnx`` are the same)."""
        domain = DEFAULT_DOMAIN if domain == "ai.onnx" else domain
        return self.opset_imports.get(domain, 1)

    def value(self, name: str) -> Value | None:
        """What the graph declares about a value name, if anything."""
        for value in self.inputs:
            if value.name == name:
                return value
        for value in self.outputs:
            if value.name == name:
                return value
        return self.value_info.get(name)

    def walk(self, depth: int = 0) -> Iterator[tuple[Node, int]]:
        """Every node of this graph and of its subgraphs, with the subgraph depth."""
        for node in self.nodes:
            yield node, depth
            for body in node.subgraphs():
                yield from body.walk(depth + 1)

    def op_counts(self) -> Counter[tuple[str, str]]:
        """How often each ``(domain, op_type)`` occurs, subgraphs included."""
        return Counter((node.domain, node.op_type) for node, _ in self.walk())

    def toposort(self, outer: frozenset[str] = frozenset()) -> list[Node]:
        """Nodes in an order where each runs after the producers of its inputs.

        Raises :class:`InvalidGraphError` for cycles, names produced twice and inputs that
        nothing defines. ``outer`` holds the names visible from enclosing graphs.
        """
        producer: dict[str, int] = {}
        for index, node in enumerate(self.nodes):
            for out in node.outputs:
                if out and out in producer:
                    raise InvalidGraphError(
                        f"value {out!r} is produced by both {self.nodes[producer[out]].label()!r} "
                        f"and {node.label()!r} in graph {self.name!r}"
                    )
                if out:
                    producer[out] = index
        defined = set(outer) | set(self.initializers) | {v.name for v in self.inputs}
        reads = [self._reads(node) for node in self.nodes]
        in_order = True
        for index, (node, names) in enumerate(zip(self.nodes, reads, strict=True)):
            for name in names:
                source = producer.get(name)
                if source is not None:
                    in_order = in_order and source < index
                elif name not in defined:
                    raise InvalidGraphError(
                        f"node {node.label()!r} ({node.op_type}) reads {name!r}, which no node, "
                        f"input or initializer of graph {self.name!r} defines"
                    )
        for value in self.outputs:
            if value.name not in producer and value.name not in defined:
                raise InvalidGraphError(f"graph output {value.name!r} of {self.name!r} is never produced")

        if in_order:
            return list(self.nodes)  # already in order, as loaded graphs mostly are
        # Kahn's algorithm, always taking the earliest ready node so that file order
        # is kept wherever it is already valid.
        waiting = [0] * len(self.nodes)
        consumers: dict[int, list[int]] = {}
        for index, names in enumerate(reads):
            for source in {producer[n] for n in names if n in producer}:
                waiting[index] += 1
                consumers.setdefault(source, []).append(index)
        ready = [i for i, count in enumerate(waiting) if count == 0]
        heapq.heapify(ready)
        order: list[Node] = []
        while ready:
            index = heapq.heappop(ready)
            order.append(self.nodes[index])
            for consumer in consumers.get(index, ()):
                waiting[consumer] -= 1
                if waiting[consumer] == 0:
                    heapq.heappush(ready, consumer)
        if len(order) != len(self.nodes):
            stuck = [self.nodes[i].label() for i, count in enumerate(waiting) if count][:5]
            raise InvalidGraphError(f"graph {self.name!r} has a cycle through nodes {stuck}")
        return order

    @staticmethod
    def _reads(node: Node) -> set[str]:
        """Names a node reads: its inputs and the outer names its subgraphs use."""
        names = set(node.inputs)
        names.discard("")
        for body in node.subgraphs():
            names |= body.free_names()
        return names

    def defined_names(self) -> set[str]:
        """The value names this graph defines: its initializers, its inputs and its nodes' outputs."""
        names = set(self.initializers)
        names.update(value.name for value in self.inputs)
        for node in self.nodes:
            names.update(node.outputs)
        return names

    def free_names(self) -> set[str]:
        """Names this graph reads from enclosing scopes."""
        if self._free_names is not None:
            return set(self._free_names)
        defined = self.defined_names()
        read: set[str] = set()
        bodies: list[Graph] = []
        for node in self.nodes:
            read.update(node.inputs)
            bodies += node.subgraphs()
        read.discard("")  # an omitted optional input
        for body in bodies:
            read |= body.free_names()
        free = (read | {value.name for value in self.outputs}) - defined
        if self._remember:
            self._free_names = frozenset(free)
        return free

    def remember_free_names(self, remember: bool = True) -> None:
        """Have :meth:`free_names` keep its answer (or stop), for a caller that edits the graph
        meanwhile only where it calls :meth:`forget_free_names` (the optimizer does, for the
        subgraphs of the graph it rewrites: every pass asks for them, most never change them)."""
        self._remember, self._free_names = remember, None

    def forget_free_names(self) -> None:
        """Drop the answer :meth:`free_names` kept: the graph or one of its subgraphs was edited."""
        self._free_names = None
