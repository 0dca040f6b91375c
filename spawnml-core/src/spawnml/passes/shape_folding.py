"""Shape folding: ``Shape`` and ``Size`` of a value whose shape is statically known become constants."""

from __future__ import annotations

import math

import numpy as np

from ..ir import Graph
from .context import PassContext
from .graph_edit import output_names


def fold_shapes(graph: Graph, ctx: PassContext) -> int:
    """Replace ``Shape``/``Size`` nodes of fully known shapes by int64 initializers; return how many."""
    outputs = output_names(graph)
    folded: set[int] = set()
    for node in graph.nodes:
        if node.domain or node.op_type not in ("Shape", "Size") or node.outputs[0] in outputs:
            continue
        known = ctx.types(graph).get(node.inputs[0])
        if known is None or known.shape is None:
            continue
        dims = [dim for dim in known.shape if isinstance(dim, int)]
        if len(dims) != len(known.shape):
            continue
        if node.op_type == "Size":
            value = np.array(math.prod(dims), dtype=np.int64)
        else:
            start, end = node.attrs.get("start", 0), node.attrs.get("end")
            value = np.array(dims[slice(start, end)], dtype=np.int64)
        graph.initializers[node.outputs[0]] = value
        folded.add(id(node))
    graph.nodes = [node for node in graph.nodes if id(node) not in folded]
    return len(folded)
