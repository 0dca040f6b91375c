"""Find the bias Add before a node that can take the bias in, as onnxruntime's fusions do."""

from __future__ import annotations

from typing import NamedTuple

from ..ir import Graph, Node
from .context import PassContext
from .graph_edit import constant, only_reader

#: The nodes reading each value, as :func:`.graph_edit.consumers` gives them.
Readers = dict[str, list[Node]]


class BiasAdd(NamedTuple):
    """``node``: ``Add(x, bias)`` (in either order), with ``bias`` a constant vector."""

    node: Node
    x: str
    bias: str


def bias_add(
    graph: Graph, ctx: PassContext, made: dict[str, Node], readers: Readers, name: str
) -> BiasAdd | None:
    """The Add making ``name`` when it adds a constant vector as long as the other addend's last
    axis (so the sum has that addend's shape) and ``name`` is read by one node and is no graph output."""
    add = made.get(name)
    if add is None or add.op_type != "Add" or add.domain or len(add.inputs) != 2:
        return None
    if only_reader(graph, readers, name) is None:
        return None
    types = ctx.types(graph)
    for index in (0, 1):
        x, bias_name = add.inputs[index], add.inputs[1 - index]
        bias, known = constant(graph, bias_name), types.get(x)
        if bias is None or bias.ndim != 1 or known is None or not known.shape:
            continue
        if known.shape[-1] == bias.shape[0] and known.dtype == bias.dtype:
            return BiasAdd(add, x, bias_name)
    return None
