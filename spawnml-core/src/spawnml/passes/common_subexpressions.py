"""Common-subexpression elimination: a node computing what an earlier node computes is dropped.

Two ai.onnx nodes compute the same when they have the same operator, attributes and inputs, as in
onnxruntime's pass of this name. Shape nodes compute the same too when their inputs' inferred
shapes are equal and fully known: sizes, or dimension names, which stand for one size each (the
session checks that every feed agrees on them). Exported transformers take the shape of every
layer's keys anew, and the slices and concatenations after each Shape then merge too.
Operators that draw random numbers, and nodes with subgraphs, are left alone.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from ..ir import Graph, Node
from ..ops.schema import TensorType
from .context import PassContext
from .graph_edit import output_names, rename_uses

#: Operators whose results differ from one call to the next.
RANDOM_OPS = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
        "Dropout",
    }
)


def eliminate_common_subexpressions(graph: Graph, ctx: PassContext) -> int:
    """Make the readers of each repeated computation read its first one; return how many nodes went."""
    types = ctx.types(graph) if any(node.op_type == "Shape" for node in graph.nodes) else {}
    outputs = output_names(graph)
    seen: dict[Hashable, list[Node]] = {}  # by operator and inputs: few nodes share them
    renames: dict[str, str] = {}  # a dropped node's output -> the same output of the kept one
    gone: list[Node] = []
    for node in graph.nodes:
        if node.domain or node.op_type in RANDOM_OPS:
            continue
        if renames:
            node.inputs = [renames.get(name, name) for name in node.inputs]
        kin = seen.setdefault((node.op_type, _inputs(node, types)), [])
        kept = next((earlier for earlier in kin if _same(earlier, node)), None)
        if kept is None:
            kin.append(node)
        elif not any(name in outputs for name in node.outputs):
            renames.update((old, new) for old, new in zip(node.outputs, kept.outputs, strict=True) if old)
            gone.append(node)
    if gone:
        dropped = {id(node) for node in gone}
        graph.nodes = [node for node in graph.nodes if id(node) not in dropped]
        _rename(graph, renames)
    return len(gone)


def _rename(graph: Graph, renames: dict[str, str]) -> None:
    """Make every reader of each name in ``renames`` read its new name."""
    if any(node.subgraphs() for node in graph.nodes):
        for old, new in renames.items():  # in the bodies too
            rename_uses(graph, old, new)
        return
    for node in graph.nodes:
        node.inputs = [renames.get(name, name) for name in node.inputs]
    graph.forget_free_names()


def _inputs(node: Node, types: dict[str, TensorType]) -> tuple[Any, ...]:
    """What ``node`` reads: its inputs' names; for a Shape node, its input's shape where fully known."""
    if node.op_type == "Shape":
        known = types.get(node.inputs[0])
        if known is not None and known.shape is not None and None not in known.shape:
            return ("shape of", known.shape)
    return tuple(node.inputs)


def _same(kept: Node, node: Node) -> bool:
    """Whether ``node`` computes what ``kept``, of the same operator and inputs, does."""
    if len(kept.outputs) != len(node.outputs) or any(node.subgraphs()):
        return False
    if any(bool(a) != bool(b) for a, b in zip(kept.outputs, node.outputs, strict=True)):
        return False
    return _frozen(kept.attrs) == _frozen(node.attrs)


def _frozen(value: Any) -> Any:
    """``value`` (an attribute, or the dict of them) in a form that equals another only for the same
    attribute: floats by their bits (so -0.0 and 0.0 differ, and NaN equals NaN)."""
    if isinstance(value, dict):
        return tuple(sorted((name, _frozen(item)) for name, item in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(item) for item in value)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    return value
