"""Fuse the exact GELU subgraph ``x * 0.5 * (1 + erf(x / sqrt(2)))`` into one Gelu.

Matched in the arrangements exporters write: ``x / sqrt(2)`` or ``x * (1 / sqrt(2))``, and the
halving applied to ``x``, to ``1 + erf(...)`` or to the product. It becomes ai.onnx Gelu from opset 20,
and onnxruntime's ``com.microsoft`` Gelu before.
"""

from __future__ import annotations

import math

from ..ir import Graph, Node
from .context import MS_DOMAIN, PassContext, import_domain
from .graph_edit import constant, consumers, only_reader, producers, remove_nodes, scalar

#: How close the constants must be to sqrt(2), 1 and 0.5 (float32 spellings of them).
TOLERANCE = 1e-4


def fuse_gelu(graph: Graph, ctx: PassContext) -> int:
    """Replace each matched GELU subgraph by a single node; return how many."""
    fused = 0
    for erf in [node for node in graph.nodes if node.op_type == "Erf" and not node.domain]:
        match = _match(graph, erf)
        if match is None:
            continue
        x, output, nodes = match
        domain = "" if graph.opset() >= 20 else MS_DOMAIN
        gelu = Node("Gelu", [x], [output], name=erf.name, domain=domain)
        if not ctx.may_replace(graph, nodes, gelu):
            continue
        if domain:
            import_domain(graph, domain)
        graph.nodes[graph.nodes.index(erf)] = gelu
        remove_nodes(graph, [node for node in nodes if node is not erf])
        fused += 1
    return fused


def _match(graph: Graph, erf: Node) -> tuple[str, str, list[Node]] | None:
    """``(x, output name, nodes replaced)`` when ``erf`` sits in a GELU subgraph."""
    made, readers = producers(graph), consumers(graph)
    scaled = made.get(erf.inputs[0])
    x = _scaled_input(graph, scaled)
    if x is None or scaled is None or only_reader(graph, readers, erf.inputs[0]) is not erf:
        return None
    plus_one = only_reader(graph, readers, erf.outputs[0])
    if plus_one is None or not _near(_constant_operand(graph, plus_one, "Add", erf.outputs[0]), 1.0):
        return None
    product = only_reader(graph, readers, plus_one.outputs[0])
    if product is None or product.op_type != "Mul" or product.domain:
        return None
    other = _other(product, plus_one.outputs[0])
    nodes = [scaled, erf, plus_one, product]
    if other == x or _near(scalar(constant(graph, other)), 0.5):
        last = only_reader(graph, readers, product.outputs[0])
        wanted = 0.5 if other == x else None
        if last is None or last.op_type != "Mul" or last.domain:
            return None
        operand = _other(last, product.outputs[0])
        if wanted is None and operand != x:
            return None
        if wanted is not None and not _near(scalar(constant(graph, operand)), wanted):
            return None
        return x, last.outputs[0], [*nodes, last]
    half = made.get(other)
    if half is None or not _near(_constant_operand(graph, half, "Mul", x), 0.5):
        return None
    if only_reader(graph, readers, other) is not product:
        return None
    return x, product.outputs[0], [*nodes, half]


def _scaled_input(graph: Graph, node: Node | None) -> str | None:
    """``x`` when ``node`` is ``x / sqrt(2)`` or ``x * (1 / sqrt(2))``."""
    if node is None or node.domain:
        return None
    if node.op_type == "Div" and _near(scalar(constant(graph, node.inputs[1])), math.sqrt(2)):
        return node.inputs[0]
    if node.op_type == "Mul":
        for index in (0, 1):
            if _near(scalar(constant(graph, node.inputs[1 - index])), 1 / math.sqrt(2)):
                return node.inputs[index]
    return None


def _constant_operand(graph: Graph, node: Node, op: str, operand: str) -> float | None:
    """The constant that ``node``, an ``op`` of ``operand`` and a constant, applies."""
    if node.op_type != op or node.domain or operand not in node.inputs:
        return None
    return scalar(constant(graph, _other(node, operand)))


def _other(node: Node, name: str) -> str:
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]


def _near(value: float | None, expected: float) -> bool:
    return value is not None and abs(value - expected) < TOLERANCE
