"""Small queries and edits of a graph's wiring that the rewrite passes share."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import replace

import numpy as np

from ..ir import Graph, Node, Value


def constant(graph: Graph, name: str) -> np.ndarray | None:
    """The value of ``name`` when it is an initializer no caller can override, else None."""
    if name not in graph.initializers or any(value.name == name for value in graph.inputs):
        return None
    return graph.initializers[name]


def producers(graph: Graph) -> dict[str, Node]:
    """The node producing each value name."""
    return {name: node for node in graph.nodes for name in node.outputs if name}


def consumers(graph: Graph) -> dict[str, list[Node]]:
    """The nodes reading each value name, directly or from one of their subgraphs."""
    readers: dict[str, list[Node]] = defaultdict(list)
    for node in graph.nodes:
        for name in Graph._reads(node):
            readers[name].append(node)
    return readers


def output_names(graph: Graph) -> set[str]:
    return {value.name for value in graph.outputs}


def only_reader(graph: Graph, readers: dict[str, list[Node]], name: str) -> Node | None:
    """The single node reading ``name``, if exactly one does and it is not a graph output."""
    nodes = readers.get(name, [])
    if len(nodes) != 1 or name in output_names(graph):
        return None
    return nodes[0]


def rename_uses(graph: Graph, old: str, new: str) -> None:
    """Make every reader of ``old`` read ``new``, in subgraphs too (unless one redefines it)."""
    for node in graph.nodes:
        node.inputs = [new if name == old else name for name in node.inputs]
        for body in node.subgraphs():
            if old in body.free_names():
                rename_uses(body, old, new)
                body.outputs = [_renamed(value, old, new) for value in body.outputs]
    graph.forget_free_names()


def _renamed(value: Value, old: str, new: str) -> Value:
    return replace(value, name=new) if value.name == old else value


def bypass(graph: Graph, node: Node, source: str) -> bool:
    """Remove ``node``, whose only output equals ``source``; False when that would rename an output.

    When the output is a graph output, ``source``'s producer is renamed to it instead, which
    is possible only where ``source`` is a plain intermediate value.
    """
    target = node.outputs[0]
    outputs = output_names(graph)
    if target not in outputs:
        graph.nodes.remove(node)
        rename_uses(graph, target, source)
        return True
    producer = producers(graph).get(source)
    if producer is None or source in outputs:
        return False
    graph.nodes.remove(node)
    producer.outputs = [target if name == source else name for name in producer.outputs]
    rename_uses(graph, source, target)
    return True


def remove_nodes(graph: Graph, nodes: Iterable[Node]) -> None:
    dropped = {id(node) for node in nodes}
    graph.nodes = [node for node in graph.nodes if id(node) not in dropped]


def fresh_name(taken: Collection[str], base: str) -> str:
    """``base``, or ``base`` with the first ``_1``, ``_2``, ... suffix that makes it a name not ``taken``."""
    name, index = base, 0
    while name in taken:
        index += 1
        name = f"{base}_{index}"
    return name


def new_constant(graph: Graph, taken: set[str], base: str, array: np.ndarray) -> str:
    """Add ``array`` to ``graph`` as an initializer named after ``base`` and not ``taken`` (the
    name is taken from then on); return the name."""
    name = fresh_name(taken, base)
    taken.add(name)
    graph.initializers[name] = array
    return name


def scalar(array: np.ndarray | None) -> float | None:
    """The single number an array holds (of any shape of one element), else None."""
    if array is None or array.size != 1 or array.dtype.kind not in "fiu":
        return None
    return float(array.reshape(()))
