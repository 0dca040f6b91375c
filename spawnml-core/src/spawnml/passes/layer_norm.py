"""Fuse the decomposed layer normalization over the last axis into LayerNormalization.

The subgraph is ``(x - mean(x)) / sqrt(mean((x - mean(x)) ** 2) + eps) * gamma + beta``,
as ``ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add`` (the trailing Add is
optional). Before opset 17 the fused node is the ai.onnx LayerNormalization onnxruntime
defines as a contrib operator.
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from ..ops.schema import TensorType
from .context import PassContext
from .graph_edit import (
    constant,
    consumers,
    new_constant,
    output_names,
    producers,
    remove_nodes,
    scalar,
)

#: The divisor's producers, back through their first inputs: ``sqrt(mean(d ** 2) + eps)``.
VARIANCE = ("Sqrt", "Add", "ReduceMean", "Pow")


def fuse_layer_norm(graph: Graph, ctx: PassContext) -> int:
    """Replace each matched layer-normalization subgraph by one node; return how many."""
    fused = 0
    made, readers = producers(graph), None
    for div in [node for node in graph.nodes if node.op_type == "Div" and not node.domain]:
        if _chain(made, div.inputs[1], VARIANCE) is None:  # most Divs: no normalization
            continue
        if readers is None:  # found at the first candidate, and again after each fusion
            readers = consumers(graph)
        match = _match(graph, ctx, div, made, readers)
        if match is None:
            continue
        x, epsilon, gamma, beta, output, nodes = match
        params = [_vector(graph, gamma)] + ([_vector(graph, beta)] if beta is not None else [])
        fused_node = Node(
            "LayerNormalization", [x, *params], [output], {"axis": -1, "epsilon": epsilon}, name=div.name
        )
        if not ctx.may_replace(graph, nodes, fused_node):
            for name in params:  # a pass that changes nothing leaves the graph as it was
                del graph.initializers[name]
            continue
        graph.nodes[graph.nodes.index(div)] = fused_node
        remove_nodes(graph, [node for node in nodes if node is not div])
        made, readers = producers(graph), None
        fused += 1
    return fused


def _match(
    graph: Graph,
    ctx: PassContext,
    div: Node,
    made: dict[str, Node],
    readers: dict[str, list[Node]],
) -> tuple[str, float, np.ndarray, np.ndarray | None, str, list[Node]] | None:
    chain = _chain(made, div.inputs[1], VARIANCE)
    centred = _producer(made, div.inputs[0], "Sub")
    if chain is None or centred is None:
        return None
    sqrt, add_eps, variance, square = chain
    epsilon = scalar(constant(graph, add_eps.inputs[1]))
    if epsilon is None or scalar(constant(graph, square.inputs[1])) != 2.0:
        return None
    centred_again = _producer(made, square.inputs[0], "Sub")
    if centred_again is None or centred_again.inputs != centred.inputs:
        return None
    x, mean_name = centred.inputs
    mean = _producer(made, mean_name, "ReduceMean")
    if mean is None or mean.inputs[0] != x:
        return None
    rank = ctx.types(graph).get(x, TensorType(None, None)).shape
    if rank is None or not all(_last_axis(graph, node, len(rank)) for node in (mean, variance)):
        return None
    scale = _single_reader(readers, div.outputs[0])
    gamma = _operand(graph, scale, "Mul", div.outputs[0], len(rank))
    if scale is None or gamma is None:  # gamma is None where scale is
        return None
    shift = _single_reader(readers, scale.outputs[0])
    beta = _operand(graph, shift, "Add", scale.outputs[0], len(rank))
    nodes = list(
        {
            id(n): n for n in (mean, centred, centred_again, square, variance, add_eps, sqrt, div, scale)
        }.values()
    )
    last = scale
    if shift is not None and beta is not None:  # beta is None where shift is
        nodes.append(shift)
        last = shift
    if not _internal(graph, readers, nodes, last):
        return None
    return x, epsilon, gamma, beta, last.outputs[0], nodes


def _is(node: Node | None, op: str) -> bool:
    return node is not None and node.op_type == op and not node.domain


def _producer(made: dict[str, Node], name: str, op: str) -> Node | None:
    """The node making ``name`` when it is an ``op`` (of the default domain)."""
    node = made.get(name)
    return node if node is not None and _is(node, op) else None


def _chain(made: dict[str, Node], name: str, ops: tuple[str, ...]) -> list[Node] | None:
    """The producers of ``name`` back through the first inputs, when their types are ``ops``."""
    nodes = []
    for op in ops:
        node = _producer(made, name, op)
        if node is None:
            return None
        nodes.append(node)
        name = node.inputs[0]
    return nodes


def _last_axis(graph: Graph, node: Node, rank: int) -> bool:
    """Whether a ReduceMean keeps dims and reduces exactly the last axis."""
    if node.attrs.get("keepdims", 1) != 1:
        return False
    axes = node.attrs.get("axes")
    if graph.opset() >= 18:
        value = constant(graph, node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
        axes = None if value is None else value.reshape(-1).tolist()
    return axes is not None and len(axes) == 1 and axes[0] in (-1, rank - 1)


def _single_reader(readers: dict[str, list[Node]], name: str) -> Node | None:
    nodes = readers.get(name, [])
    return nodes[0] if len(nodes) == 1 else None


def _operand(graph: Graph, node: Node | None, op: str, operand: str, rank: int) -> np.ndarray | None:
    """The constant last-axis vector that ``node`` (an ``op``) combines with ``operand``."""
    if node is None or not _is(node, op) or operand not in node.inputs:
        return None
    value = constant(graph, node.inputs[1] if node.inputs[0] == operand else node.inputs[0])
    if value is None or value.ndim == 0 or value.ndim > rank or value.size != value.shape[-1]:
        return None
    return value


def _internal(graph: Graph, readers: dict[str, list[Node]], nodes: list[Node], last: Node) -> bool:
    """Whether every value the matched nodes make, but the last, is read only among them."""
    members = {id(node) for node in nodes}
    outputs = output_names(graph)
    for node in nodes:
        if node is last:
            continue
        for name in node.outputs:
            if name in outputs or any(id(reader) not in members for reader in readers.get(name, [])):
                return False
    return True


def _vector(graph: Graph, value: np.ndarray) -> str:
    return new_constant(graph, graph.defined_names(), "layer_norm_param", value.reshape(-1))
