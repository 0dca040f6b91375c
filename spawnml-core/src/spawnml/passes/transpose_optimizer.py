"""Transpose optimization, as onnxruntime's: Transposes move down through layout-agnostic
operators until they meet their inverse and cancel.

Models converted from NHWC frameworks (tf2onnx, TFLite) put a Transpose to NCHW before each Conv
or pool and one back after it, and run elementwise operators, reductions, Concat, Pad, ... in
NHWC between them. Visiting the nodes in dependency order, a node that reads ``Transpose(s,
perm)`` is rewritten to compute on ``s`` (its other layout inputs transposed back: constants at
optimization time, a Transpose read by an inverse one cancelled) and ``Transpose(perm)`` put after
it, under its output's name, so that the next node or the next Conv's inverse Transpose meets it.
Back-to-back Transposes compose, and cancel when they compose to the identity.

A node moves a Transpose only where that removes more Transposes than it adds for its other
inputs: a Transpose it takes in goes only where every reader can take it (Transposes and handled
operators), one put after it counts as removed where Transposes alone read it, and a node of
several outputs (Split) moves one only where every output's readers take it. A Transpose that
reaches a graph output, or an operator that needs the layout (Conv, Reshape, MatMul, ...), stays
there; graph outputs keep their names and layouts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidGraphError
from ..ir import Graph, Node
from .context import PassContext
from .graph_edit import bypass, constant, consumers, fresh_name, new_constant, output_names, producers
from .transpose_handlers import HANDLERS, Perm, Push, inverse, is_identity


def optimize_transposes(graph: Graph, ctx: PassContext) -> int:
    """Push Transposes through layout-agnostic operators and cancel the pairs they meet; return
    how many nodes were rewritten."""
    if not any(node.op_type == "Transpose" and not node.domain for node in graph.nodes):
        return 0
    return _Sweep(graph, ctx).run()


class _Sweep:
    """One pass over the nodes in dependency order, with the wiring it keeps up to date."""

    def __init__(self, graph: Graph, ctx: PassContext) -> None:
        self.graph = graph
        self.opset = graph.opset()
        types = ctx.types(graph)
        self.shapes = {name: known.shape for name, known in types.items() if known.shape is not None}
        self.ranks = {name: len(shape) for name, shape in self.shapes.items()}
        self.outputs = output_names(graph)
        self.taken = {name for node, _ in graph.walk() for name in (*node.inputs, *node.outputs)}
        self.taken |= set(graph.initializers) | {value.name for value in graph.inputs} | self.outputs
        self.removed: set[int] = set()
        self.made: dict[tuple[str, tuple[int, ...]], Node] = {}  # (value, perm) -> its Transpose
        self._producers: dict[str, Node] | None = None
        self._readers: dict[str, list[Node]] | None = None

    # Wiring -----------------------------------------------------------------------------------

    def producer(self, name: str) -> Node | None:
        if self._producers is None:
            self._producers = producers(self.graph)
        return self._producers.get(name)

    def readers(self, name: str) -> list[Node]:
        if self._readers is None:
            self._readers = consumers(self.graph)
        return self._readers.get(name, [])

    def edited(self) -> None:
        self._producers = self._readers = None

    def constant(self, name: str) -> np.ndarray | None:
        return constant(self.graph, name) if name else None

    def rank(self, name: str) -> int | None:
        found = self.constant(name)
        return found.ndim if found is not None else self.ranks.get(name)

    def shape(self, name: str) -> tuple[Any, ...] | None:
        """The inferred shape of a value the sweep has not made."""
        return self.shapes.get(name)

    def perm(self, node: Node) -> Perm | None:
        """A Transpose's permutation (reversing the axes when not given)."""
        perm = node.attrs.get("perm")
        if perm is not None:
            return [int(axis) for axis in perm]
        rank = self.rank(node.inputs[0])
        return None if rank is None else list(reversed(range(rank)))

    def transposed(self, name: str) -> tuple[Node, Perm] | None:
        """The Transpose producing ``name`` and its permutation, if one does."""
        node = self.producer(name)
        if node is None or node.op_type != "Transpose" or node.domain:
            return None
        perm = self.perm(node)
        return None if perm is None else (node, perm)

    # The sweep --------------------------------------------------------------------------------

    def run(self) -> int:
        try:
            order = self.graph.toposort(frozenset(self.graph.free_names()))
        except InvalidGraphError:
            return 0
        changed = 0
        for node in order:
            if id(node) in self.removed or node.domain:
                continue
            if node.op_type == "Transpose":
                changed += self.compose(node)
            elif node.op_type in HANDLERS:
                changed += self.push(node)
        return changed

    def compose(self, second: Node) -> int:
        """Merge ``second`` with the Transpose it reads; cancel both when they make the identity."""
        found, outer = self.transposed(second.inputs[0]), self.perm(second)
        if found is None or outer is None:
            return 0
        first, inner = found
        perm = [inner[axis] for axis in outer]
        if is_identity(perm):
            if not bypass(self.graph, second, first.inputs[0]):
                return 0
            self.removed.add(id(second))
        else:
            second.inputs = [first.inputs[0]]
            second.attrs = {**second.attrs, "perm": perm}
        self.edited()
        self.drop_if_unread(first)
        return 1

    def push(self, node: Node) -> int:
        """Rewrite ``node`` onto the input of a Transpose it reads, where that pays; 1 if done."""
        tried: list[Perm] = []
        for name in node.inputs:
            found = self.transposed(name) if name else None
            if found is None or found[1] in tried:
                continue
            perm = found[1]
            tried.append(perm)
            rewrite = HANDLERS[node.op_type](node, perm, self)
            if rewrite is not None and self.pays(node, perm, rewrite):
                self.apply(node, perm, rewrite)
                return 1
        return 0

    def pays(self, node: Node, perm: Perm, rewrite: Push) -> bool:
        """Whether the rewrite takes in more Transposes (that can go: all their readers take them)
        than it adds for its other inputs, and no output whose readers cannot take a Transpose gets
        one beyond the first. Taking in none, it never moves: Transposes only move down.
        (Outputs read by Transposes alone count as one taken in: the one put after them merges.)"""
        taken, added = 0, 0
        for index in rewrite.layout:
            name = node.inputs[index]
            if not name:
                continue
            rank = self.rank(name)
            if rank is None or rank > len(perm):
                return False
            found = self.transposed(name)
            if found is not None and found[1] == perm:
                taken += self.movable(found[0].outputs[0])  # else it stays for its other readers
            elif self.constant(name) is None and rank > 0 and self.existing(name, inverse(perm)) is None:
                added += 1
        moved = [node.outputs[index] for index, out in enumerate(rewrite.outputs) if out is not None]
        if taken == 0 or taken + self.meets_transposes(moved) <= added:
            return False
        return len(moved) <= 1 or all(self.movable(name) for name in moved if name)

    def meets_transposes(self, names: list[str]) -> int:
        """1 when Transposes alone read the outputs that will get one, which it composes with."""
        if not names or any(name in self.outputs for name in names):
            return 0
        readers = [reader for name in names for reader in self.readers(name)]
        return int(bool(readers) and all(r.op_type == "Transpose" and not r.domain for r in readers))

    def movable(self, name: str) -> bool:
        """Whether every reader of ``name`` can take a Transpose of it (so it goes when they have)."""
        if name in self.outputs:
            return False
        return all(
            not reader.domain and (reader.op_type == "Transpose" or reader.op_type in HANDLERS)
            for reader in self.readers(name)
        )

    def apply(self, node: Node, perm: Perm, rewrite: Push) -> None:
        before: list[Node] = []
        sources = [self.transposed(node.inputs[index]) for index in rewrite.layout]
        for index in rewrite.layout:
            if node.inputs[index]:
                node.inputs[index] = self.in_source_layout(node.inputs[index], perm, before)
        for index, array in rewrite.constants.items():
            node.inputs += [""] * (index + 1 - len(node.inputs))
            base = node.inputs[index] or f"{node.name or node.op_type}_input{index}"
            node.inputs[index] = new_constant(self.graph, self.taken, f"{base}_permuted", array)
        node.attrs = {**node.attrs, **rewrite.attrs}
        after: list[Node] = []
        for index, out in enumerate(rewrite.outputs):
            name = node.outputs[index]
            if out is None or not name:
                continue
            inner = fresh_name(self.taken, f"{name}_untransposed")
            self.taken.add(inner)
            self.ranks[inner] = len(out)
            node.outputs[index] = inner
            after.append(Node("Transpose", [inner], [name], {"perm": out}, f"{name}_transpose"))
        where = self.graph.nodes.index(node)
        self.graph.nodes[where : where + 1] = [*before, node, *after]
        self.edited()
        for found in sources:
            if found is not None:
                self.drop_if_unread(found[0])

    def in_source_layout(self, name: str, perm: Perm, before: list[Node]) -> str:
        """``name`` as the rewritten node needs it: unsqueezed to the rank of ``perm`` (as
        broadcasting does) and transposed by its inverse."""
        rank, back = len(perm), inverse(perm)
        array = self.constant(name)
        if array is not None:
            if array.ndim == 0 or (array.size == 1 and array.ndim <= rank):
                return name  # broadcasts alike in any layout
            moved = np.transpose(array.reshape((1,) * (rank - array.ndim) + array.shape), back)
            return new_constant(self.graph, self.taken, f"{name}_permuted", np.ascontiguousarray(moved))
        if self.rank(name) == 0:
            return name
        found = self.transposed(name)
        if found is not None and len(found[1]) == rank:
            source, first = found[0].inputs[0], found[1]
            composed = [first[axis] for axis in back]
            return source if is_identity(composed) else self.transpose(source, composed, before)
        existing = self.existing(name, back)
        if existing is not None:
            return existing  # as a residual the NHWC value is read transposed for a Conv already
        source = name
        missing = rank - (self.rank(name) or rank)
        if missing:
            source = self.unsqueeze(source, missing, before)
        return self.transpose(source, back, before)

    def existing(self, name: str, perm: Perm) -> str | None:
        """The output of a Transpose of ``name`` by ``perm`` already in the graph, if any."""
        for reader in self.readers(name):
            if reader.op_type == "Transpose" and not reader.domain and self.perm(reader) == perm:
                return reader.outputs[0]
        return None

    def transpose(self, name: str, perm: Perm, before: list[Node]) -> str:
        key = (name, tuple(perm))
        made = self.made.get(key)
        if made is not None and id(made) not in self.removed:
            return made.outputs[0]  # a residual read by two rewritten nodes is transposed once
        result = fresh_name(self.taken, f"{name}_transposed")
        self.taken.add(result)
        self.ranks[result] = len(perm)
        node = Node("Transpose", [name], [result], {"perm": perm}, f"{result}_node")
        before.append(node)
        self.made[key] = node
        return result

    def unsqueeze(self, name: str, count: int, before: list[Node]) -> str:
        result = fresh_name(self.taken, f"{name}_unsqueezed")
        self.taken.add(result)
        self.ranks[result] = (self.rank(name) or 0) + count
        axes = list(range(count))
        if self.opset >= 13:
            axes_name = new_constant(self.graph, self.taken, f"{result}_axes", np.array(axes, np.int64))
            before.append(Node("Unsqueeze", [name, axes_name], [result], {}, f"{result}_node"))
        else:
            before.append(Node("Unsqueeze", [name], [result], {"axes": axes}, f"{result}_node"))
        return result

    def drop_if_unread(self, node: Node) -> None:
        """Remove a Transpose nothing reads any more (dead-node elimination would, later)."""
        if id(node) in self.removed or node.outputs[0] in self.outputs or self.readers(node.outputs[0]):
            return
        self.graph.nodes.remove(node)
        self.removed.add(id(node))
        self.edited()
