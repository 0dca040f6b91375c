"""No-op elimination: Identity, inference-time Dropout, and operators that leave their input as is.

Those are ``Cast`` to the type the input already has, ``Transpose`` with the identity
permutation, and ``Reshape``, ``Flatten``, ``Squeeze``, ``Expand`` and ``Tile`` whose
statically known output shape is the input's.
"""

from __future__ import annotations

from ..ir import Graph, Node
from ..ops.schema import TensorType
from .context import PassContext
from .graph_edit import bypass, constant, consumers

#: Operators that only rearrange or repeat data: a no-op when the shape is unchanged.
SHAPE_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Expand", "Tile"})
#: Operators whose removal depends on the inferred types.
TYPED_OPS = SHAPE_OPS | {"Cast", "Transpose"}


def eliminate_no_ops(graph: Graph, ctx: PassContext) -> int:
    """Remove every no-op node, reconnecting its readers to its input; return how many."""
    typed = any(node.op_type in TYPED_OPS and not node.domain for node in graph.nodes)
    types = ctx.types(graph) if typed else {}
    readers = consumers(graph) if any(node.op_type == "Dropout" for node in graph.nodes) else {}
    removed = 0
    for node in list(graph.nodes):
        if not node.domain and node.inputs and node.inputs[0] and _is_no_op(graph, node, types, readers):
            removed += bypass(graph, node, node.inputs[0])
    return removed


def _is_no_op(graph: Graph, node: Node, types: dict[str, TensorType], readers: dict[str, list[Node]]) -> bool:
    op = node.op_type
    if op == "Identity":
        return True
    if op == "Dropout":
        return _inference_dropout(graph, node, readers)
    source, result = types.get(node.inputs[0]), types.get(node.outputs[0])
    if source is None or result is None or len(node.outputs) != 1:
        return False
    if op == "Cast":
        return source.dtype is not None and source.dtype == result.dtype
    if op == "Transpose":
        perm = node.attrs.get("perm")
        return perm is not None and list(perm) == list(range(len(perm)))
    return op in SHAPE_OPS and _static(source) and source.shape == result.shape


def _inference_dropout(graph: Graph, node: Node, readers: dict[str, list[Node]]) -> bool:
    """Dropout is the identity unless in training mode, or when its mask is read."""
    if (
        len(node.outputs) > 1
        and node.outputs[1]
        and (readers.get(node.outputs[1]) or _is_output(graph, node))
    ):
        return False
    if len(node.inputs) > 2 and node.inputs[2]:
        training = constant(graph, node.inputs[2])
        return training is not None and not bool(training)
    return True


def _is_output(graph: Graph, node: Node) -> bool:
    return any(value.name in node.outputs[1:] for value in graph.outputs)


def _static(known: TensorType) -> bool:
    return known.shape is not None and all(isinstance(dim, int) for dim in known.shape)
