"""Fold a constant scalar Mul into the weights of the MatMul (and its bias Add) that it scales.

``(x @ w + b) * s`` becomes ``x @ (w * s) + b * s``, also where only reshapes and transposes lie
between the product and the Mul (a scalar commutes with them): exported attention layers scale
queries and keys by ``head_size ** -0.25`` each after splitting them into heads. The scaled
weights are new initializers; the originals stay for their other readers.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import Graph, Node
from ..ops.schema import TensorType
from .bias_add import BiasAdd, Readers, bias_add
from .context import PassContext
from .graph_edit import (
    bypass,
    constant,
    consumers,
    defined_names,
    fresh_name,
    only_reader,
    producers,
)

#: Operators that only move elements (their first input), which a scalar Mul commutes with.
MOVERS = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten"})


def fold_scales(graph: Graph, ctx: PassContext) -> int:
    """Fold every constant scalar Mul of a projection into its weights; return how many."""
    if not any(node.op_type == "MatMul" and not node.domain for node in graph.nodes):
        return 0
    made, readers = producers(graph), consumers(graph)
    taken = defined_names(graph)
    folded = 0
    for mul in [node for node in graph.nodes if node.op_type == "Mul" and not node.domain]:
        for index in (0, 1):
            name, scale = mul.inputs[index], constant(graph, mul.inputs[1 - index])
            if not _scalar_for(ctx.types(graph), scale, name, mul.outputs[0]):
                continue
            source = _projection(graph, ctx, made, readers, mul, name)
            if source is None:
                continue
            matmul, bias = source
            matmul.inputs = [matmul.inputs[0], _scaled(graph, taken, matmul.inputs[1], scale)]
            if bias is not None:
                inputs = [bias.x, _scaled(graph, taken, bias.bias, scale)]
                bias.node.inputs = inputs if bias.node.inputs[0] == bias.x else inputs[::-1]
            bypass(graph, mul, name)  # ``name`` is read by the Mul alone: no graph output
            made, readers = producers(graph), consumers(graph)
            folded += 1
            break
    return folded


def _scalar_for(types: dict[str, TensorType], scale: np.ndarray | None, name: str, result: str) -> bool:
    """Whether ``scale`` is one finite, nonzero number and multiplying ``name`` by it keeps its shape."""
    if scale is None or scale.size != 1 or scale.dtype.kind != "f":
        return False
    value = scale.item()
    if not math.isfinite(value) or value == 0:
        return False
    known, made = types.get(name), types.get(result)
    return known is not None and made is not None and known.shape is not None and known.shape == made.shape


def _projection(
    graph: Graph, ctx: PassContext, made: dict[str, Node], readers: Readers, mul: Node, name: str
) -> tuple[Node, BiasAdd | None] | None:
    """The MatMul by a constant weight (and the bias Add after it) whose result reaches ``mul`` as
    ``name`` through element movers alone, each value on the way read by the next node only."""
    reader = mul
    while True:
        if only_reader(graph, readers, name) is not reader:
            return None
        node = made.get(name)
        if node is None or node.domain or node.op_type not in MOVERS:
            break
        name, reader = node.inputs[0], node
    bias = bias_add(graph, ctx, made, readers, name)
    if bias is not None:
        name = bias.x
        if only_reader(graph, readers, name) is not bias.node:
            return None
    matmul = made.get(name)
    if matmul is None or matmul.op_type != "MatMul" or matmul.domain:
        return None
    weight = constant(graph, matmul.inputs[1])
    if weight is None or weight.dtype.kind != "f" or weight.ndim < 2:
        return None
    return matmul, bias


def _scaled(graph: Graph, taken: set[str], name: str, scale: np.ndarray) -> str:
    """A new initializer holding ``name``'s constant times ``scale``, in its element type."""
    array = graph.initializers[name]
    scaled = fresh_name(taken, f"{name}_scaled")
    taken.add(scaled)
    graph.initializers[scaled] = (array.astype(np.float64) * float(scale.item())).astype(array.dtype)
    return scaled
