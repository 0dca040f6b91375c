"""Dead-node elimination: drop nodes, initializers and value infos that no output depends on."""

from __future__ import annotations

from ..ir import Graph


def eliminate_dead_nodes(graph: Graph) -> int:
    """Remove nodes whose outputs nothing reads; return how many nodes went."""
    live = {value.name for value in graph.outputs}
    kept = []
    for node in reversed(graph.toposort(frozenset(graph.free_names()))):
        if any(name in live for name in node.outputs if name):
            kept.append(node)
            live |= Graph._reads(node)
    removed = len(graph.nodes) - len(kept)
    alive = {id(node) for node in kept}
    graph.nodes = [node for node in graph.nodes if id(node) in alive]
    feedable = {value.name for value in graph.inputs}
    graph.initializers = {
        name: array for name, array in graph.initializers.items() if name in live or name in feedable
    }
    produced = {name for node in graph.nodes for name in node.outputs}
    graph.value_info = {name: value for name, value in graph.value_info.items() if name in produced}
    return removed
