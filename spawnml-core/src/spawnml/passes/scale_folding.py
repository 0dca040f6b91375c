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
    new_constant,
    only_reader,
    producers,
)

#: Operators that only move elements (their first input), which a scalar Mul commutes with.
MOVERS = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten"})


def fold_scales(graph: Graph, ctx: PassContext) -> int:
    """Fold every constant scalar Mul of a projection into its weights; return how many."""
    if not any(node.op_type == "MatMul" and not node.domain for node in graph.nodes):
        return 0
    scalings = [
        (mul, mul.inputs[index], scale)
        for mul in graph.nodes
        if mul.op_type == "Mul" and not mul.domain
        for index in (0, 1)
        if (scale := constant(graph, mul.inputs[1 - index])) is not None
        and _scalar_for(ctx.types(graph), scale, mul, index)
    ]
    if not scalings:
        return 0
    # Kept as they are while Muls go: a chain that ran through a folded Mul is left for the next run.
    made, readers = producers(graph), consumers(graph)
    taken = graph.defined_names()
    folded = set()
    for mul, name, scale in scalings:
        source = None if id(mul) in folded else _projection(graph, ctx, made, readers, mul, name)
        if source is None:
            continue
        matmul, bias = source
        matmul.inputs = [matmul.inputs[0], _scaled(graph, taken, matmul.inputs[1], scale)]
        if bias is not None:
            inputs = [bias.x, _scaled(graph, taken, bias.bias, scale)]
            bias.node.inputs = inputs if bias.node.inputs[0] == bias.x else inputs[::-1]
        bypass(graph, mul, name)  # ``name`` is read by the Mul alone: no graph output
        folded.add(id(mul))
    return len(folded)


def _scalar_for(types: dict[str, TensorType], scale: np.ndarray | None, mul: Node, index: int) -> bool:
    """Whether ``scale`` is one finite, nonzero number and multiplying ``mul``'s input ``index`` by it
    keeps that input's shape."""
    if scale is None or scale.size != 1 or scale.dtype.kind != "f":
        return False
    value = scale.item()
    if not math.isfinite(value) or value == 0:
        return False
    known, made = types.get(mul.inputs[index]), types.get(mul.outputs[0])
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
    """A new initializer holding ``name``'s constant times ``scale`` (of the same element type)."""
    array = graph.initializers[name]
    scaled = (array * scale.reshape(())).astype(array.dtype, copy=False)
    return new_constant(graph, taken, f"{name}_scaled", scaled)
