"""Transpose cancellation: a Transpose of a Transpose becomes one Transpose, or none."""

from __future__ import annotations

from ..ir import Graph
from .context import PassContext
from .graph_edit import bypass, producers


def cancel_transposes(graph: Graph, ctx: PassContext) -> int:
    """Compose back-to-back Transposes (the first stays while others read it); return how many."""
    changed = 0
    made = producers(graph)
    for second in list(graph.nodes):
        if second.op_type != "Transpose" or second.domain:
            continue
        first = made.get(second.inputs[0])
        if first is None or first.op_type != "Transpose" or first.domain:
            continue
        outer, inner = second.attrs.get("perm"), first.attrs.get("perm")
        if outer is None or inner is None:
            continue
        perm = [inner[axis] for axis in outer]
        if perm == list(range(len(perm))):
            if bypass(graph, second, first.inputs[0]):
                changed += 1
                made = producers(graph)  # a bypass may rename a producer's output
        else:
            second.inputs = [first.inputs[0]]
            second.attrs = {**second.attrs, "perm": perm}
            changed += 1
    return changed
