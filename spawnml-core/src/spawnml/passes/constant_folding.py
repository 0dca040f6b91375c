"""Constant folding: run nodes whose inputs are all constants once, at load, on the providers.

Only initializers that no caller can override count as constants; an input with an
initializer default may be fed, so nothing reading it is folded. In a subgraph body the
constants of the enclosing scopes that it reads count too. Nodes with subgraphs,
random operators and nodes producing graph outputs are left alone.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import SpawnMLError
from ..ir import Graph, Node, Value
from ..ops.defs.tensor import constant_value
from ..tensor import EMPTY_OPTIONAL, TensorSequence
from .context import PassContext
from .graph_edit import constant, output_names

#: Operators whose result differs from run to run.
NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)


def fold_constants(graph: Graph, ctx: PassContext) -> int:
    """Replace every foldable node by initializers holding its outputs; return how many."""
    folded: set[int] = set()
    outputs = output_names(graph)
    free = graph.free_names()
    outer = {name: ctx.outer[name] for name in free if name in ctx.outer}
    if not any(_foldable(graph, node, outputs, outer) for node in graph.nodes):
        return 0  # nor will any be after a fold: a node becomes foldable only through another
    for node in graph.toposort(frozenset(free)):
        if not _foldable(graph, node, outputs, outer):
            continue
        standard = node.op_type == "Constant" and node.domain in ("", "ai.onnx")
        results = _constant(graph, node, ctx) if standard else evaluate(graph, node, ctx, outer)
        if results is None:
            continue
        graph.initializers.update(results)
        folded.add(id(node))
    graph.nodes = [node for node in graph.nodes if id(node) not in folded]
    return len(folded)


def _foldable(graph: Graph, node: Node, outputs: set[str], outer: Mapping[str, np.ndarray]) -> bool:
    return (
        node.op_type not in NONDETERMINISTIC
        and all(constant(graph, name) is not None or name in outer for name in node.inputs if name)
        and not any(name in outputs for name in node.outputs)
        and not node.subgraphs()
    )


def _constant(graph: Graph, node: Node, ctx: PassContext) -> dict[str, np.ndarray] | None:
    """A Constant node's value, read from its attributes (as its kernels do) without planning it,
    where a provider runs the node; the array is the attribute's own (weights are shared)."""
    if ctx.placement(graph, node) is None:
        return None
    try:
        return {node.outputs[0]: constant_value(node.attrs)}
    except SpawnMLError:
        return None


def evaluate(
    graph: Graph, node: Node, ctx: PassContext, outer: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray] | None:
    """The outputs of ``node`` on its constant inputs (``graph``'s own, else ``outer``'s), or None
    when no provider computes them."""
    if not ctx.providers:
        return None
    names = [name for name in node.outputs if name]
    single = Graph(
        nodes=[node],
        outputs=[Value(name) for name in names],
        initializers={
            name: graph.initializers[name] if name in graph.initializers else outer[name]
            for name in node.inputs
            if name
        },
        opset_imports=graph.opset_imports,
        name=f"folding {node.label()}",
    )
    # The planner infers shapes with this package, so it is imported when a node is folded.
    from ..planner import build_plan

    try:
        with np.errstate(all="ignore"):
            results = build_plan(single, ctx.providers, ctx.operators).run({}, names)
    except SpawnMLError:
        return None
    found = {}
    for name, (buffer, backend) in zip(names, results, strict=True):
        if isinstance(buffer, TensorSequence) or buffer is EMPTY_OPTIONAL:
            return None
        array = backend.to_numpy(buffer)
        # A result the kernel made is kept as is (MiniLM's dequantized 47 MB embedding table: a copy
        # took 0.17 s of a fresh process's session creation); a view of another array is copied.
        found[name] = array if array.flags.owndata else np.array(array)
    return found
