"""If inlining: an ``If`` whose condition is a constant becomes the nodes of the branch it takes.

onnxruntime's constant folding does the same. It lets a model that chooses its path from an
input the caller binds (a sample rate, a mode flag) run on providers without control flow, and
the inlined nodes take part in every later pass. Names the branch defines that the enclosing
graph already uses are renamed; each branch output reaches the If's output through an
``Identity``, which no-op elimination then removes.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np

from ..errors import InvalidGraphError
from ..ir import Graph, Node
from .context import PassContext
from .graph_edit import constant, rename_uses


def inline_constant_ifs(graph: Graph, ctx: PassContext) -> int:
    """Replace every If with a constant one-element condition by its branch; return how many."""
    inlined = 0
    for node in list(graph.nodes):
        if node.domain or node.op_type != "If":
            continue
        condition = constant(graph, node.inputs[0]) if node.inputs else None
        if condition is None or np.size(condition) != 1:
            continue
        taken = "then_branch" if bool(np.asarray(condition).reshape(-1)[0]) else "else_branch"
        branch = node.attrs.get(taken)
        if not isinstance(branch, Graph) or len(branch.outputs) != len(node.outputs):
            found = f"returns {len(branch.outputs)} values" if isinstance(branch, Graph) else "is missing"
            raise InvalidGraphError(
                f"If node {node.label()!r} has {len(node.outputs)} outputs but its {taken}, the branch "
                f"its constant condition takes, {found}"
            )
        _inline(graph, node, branch)
        inlined += 1
    return inlined


def _inline(graph: Graph, node: Node, branch: Graph) -> None:
    index = graph.nodes.index(node)
    del graph.nodes[index]
    used = _all_names(graph) | set(node.inputs)
    local = [*branch.initializers, *(name for inner in branch.nodes for name in inner.outputs if name)]
    taken = used | set(local)
    for name in local:
        if name in used:
            _rename_local(branch, name, _fresh(name, taken))
    bridges = [
        Node("Identity", [value.name], [output], name=f"{node.label()}/{output}")
        for value, output in zip(branch.outputs, node.outputs, strict=True)
        if output
    ]
    graph.nodes[index:index] = [*branch.nodes, *bridges]
    graph.initializers.update(branch.initializers)


def _rename_local(branch: Graph, old: str, new: str) -> None:
    """Rename a value the branch defines, with every use of it in the branch and its subgraphs."""
    if old in branch.initializers:
        branch.initializers[new] = branch.initializers.pop(old)
    for inner in branch.nodes:
        inner.outputs = [new if name == old else name for name in inner.outputs]
    rename_uses(branch, old, new)
    branch.outputs = [replace(value, name=new) if value.name == old else value for value in branch.outputs]


def _fresh(name: str, taken: set[str]) -> str:
    fresh = next(f"{name}.{i}" for i in itertools.count(1) if f"{name}.{i}" not in taken)
    taken.add(fresh)
    return fresh


def _all_names(graph: Graph) -> set[str]:
    """Every value name of ``graph`` and of its subgraphs."""
    names = {value.name for value in (*graph.inputs, *graph.outputs)} | set(graph.initializers)
    for node in graph.nodes:
        names.update(node.inputs)
        names.update(node.outputs)
        for body in node.subgraphs():
            names |= _all_names(body)
    names.discard("")
    return names
