"""Dead-node elimination: drop nodes, initializers and value infos that no output depends on."""

from __future__ import annotations

from ..ir import Graph


def eliminate_dead_nodes(graph: Graph) -> int:
    """Remove nodes whose outputs nothing reads; return how many nodes went."""
    producer = {name: node for node in graph.nodes for name in node.outputs if name}
    live = {value.name for value in graph.outputs}
    alive: set[int] = set()
    pending = list(live)
    while pending:  # back from the outputs through the producers of what live nodes read
        node = producer.get(pending.pop())
        if node is None or id(node) in alive:
            continue
        alive.add(id(node))
        reads = Graph._reads(node) - live
        live |= reads
        pending += reads
    removed = len(graph.nodes) - len(alive)
    graph.nodes = [node for node in graph.nodes if id(node) in alive]
    feedable = {value.name for value in graph.inputs}
    graph.initializers = {
        name: array for name, array in graph.initializers.items() if name in live or name in feedable
    }
    produced = {name for node in graph.nodes for name in node.outputs}
    graph.value_info = {name: value for name, value in graph.value_info.items() if name in produced}
    return removed
