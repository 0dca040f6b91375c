"""Expand SpawnML's own fused operators back into standard ONNX nodes.

A graph optimized at level ``all`` holds ``ai.spawnml::FusedElementwise`` nodes, which only
SpawnML runs. Files written for other runtimes get the chains back as the ai.onnx nodes they
were made of (see :mod:`spawnml.ops.defs.fused` for the chain encoding). Likewise a FusedConv
with one of SpawnML's own activations (:data:`.conv_activation.OWN_ACTIVATIONS`) is written as a
Conv (a FusedConv without activation, where it adds Z) and the activation's nodes.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from ..ir import Graph, Node
from ..kernel.library.chain import decode
from ..ops.defs.fused import DOMAIN
from ..ops.shapes import as_text
from .context import MS_DOMAIN
from .conv_activation import OWN_ACTIVATIONS


def expand_fused(graph: Graph) -> Graph:
    """``graph`` (a shallow copy, when it changes) with every FusedElementwise node as its chain,
    in subgraph bodies too."""
    if not _holds_fused(graph):
        return graph
    expanded = copy.copy(graph)
    expanded.nodes = [part for node in graph.nodes for part in _expand(node)]
    expanded.opset_imports = {d: v for d, v in graph.opset_imports.items() if d != DOMAIN}
    return expanded


def _holds_fused(graph: Graph) -> bool:
    return any(
        node.domain == DOMAIN or _own_activation(node) or any(map(_holds_fused, node.subgraphs()))
        for node in graph.nodes
    )


def _own_activation(node: Node) -> bool:
    """Whether ``node`` is a FusedConv with an activation onnxruntime does not take."""
    activation = node.attrs.get("activation", "")
    return node.domain == MS_DOMAIN and node.op_type == "FusedConv" and as_text(activation) in OWN_ACTIVATIONS


def _expand_conv(node: Node) -> list[Node]:
    """A FusedConv with one of SpawnML's own activations as the standard nodes it stands for."""
    base = node.name or node.outputs[0]
    activation = as_text(node.attrs["activation"])
    attrs = {name: value for name, value in node.attrs.items() if not name.startswith("activation")}
    inputs = list(node.inputs)
    if len(inputs) > 3 and inputs[3]:
        conv = Node("FusedConv", inputs, [f"{base}.conv"], attrs, f"{base}.FusedConv", MS_DOMAIN)
    else:
        while inputs and not inputs[-1]:  # Conv takes no Z, nor an empty bias
            inputs.pop()
        conv = Node("Conv", inputs[:3], [f"{base}.conv"], attrs, f"{base}.Conv")
    if activation == "HardSwish":
        return [conv, Node("HardSwish", conv.outputs, list(node.outputs), {}, f"{base}.HardSwish")]
    gate = Node("Sigmoid", conv.outputs, [f"{base}.sigmoid"], {}, f"{base}.Sigmoid")
    return [conv, gate, Node("Mul", [*conv.outputs, *gate.outputs], list(node.outputs), {}, f"{base}.Mul")]


def _expand(node: Node) -> list[Node]:
    if _own_activation(node):
        return _expand_conv(node)
    if node.domain != DOMAIN or node.op_type != "FusedElementwise":
        if not any(node.subgraphs()):
            return [node]
        return [replace(node, attrs={name: _expand_attr(value) for name, value in node.attrs.items()})]
    chain = decode(node.attrs["chain"], len(node.inputs))
    base = node.name or node.outputs[0]
    names = list(node.inputs)
    nodes = []
    for index, step in enumerate(chain):
        last = index == len(chain) - 1
        output = node.outputs[0] if last else f"{base}.step{index}"
        inputs, attributes = _standard_operands(step.op, [names[i] for i in step.inputs], step.attributes)
        nodes.append(Node(step.op, inputs, [output], attributes, f"{base}.{step.op}{index}"))
        names.append(output)
    return nodes


def _standard_operands(
    op: str, inputs: list[str], attributes: dict[str, Any]
) -> tuple[list[str], dict[str, Any]]:
    """A chain step's operands as the ai.onnx operator takes them. A chain lists only the bounds a
    Clip (opset 11 on) was given, marked by ``has_min``/``has_max``: ONNX wants them in their
    places, an omitted one as an empty name, and knows no such attributes."""
    if op != "Clip" or "has_min" not in attributes:
        return inputs, attributes
    given = iter(inputs[1:])
    bounds = [next(given) if attributes[flag] else "" for flag in ("has_min", "has_max")]
    standard = [inputs[0], *bounds]
    while standard[-1] == "":
        standard.pop()
    return standard, {name: value for name, value in attributes.items() if name not in ("has_min", "has_max")}


def _expand_attr(value: Any) -> Any:
    if isinstance(value, Graph):
        return expand_fused(value)
    if isinstance(value, list):
        return [_expand_attr(item) for item in value]
    return value
