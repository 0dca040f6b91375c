"""Shape inference: propagate element types and (symbolic) shapes through a graph."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import InvalidGraphError, SpawnMLError
from ..ir import Dim, Graph, Node
from ..ops.defs.tensor import constant_value
from ..ops.registry import OperatorRegistry
from ..ops.schema import InferenceContext, TensorType


def infer_shapes(
    graph: Graph, operators: OperatorRegistry | None = None, outer: Mapping[str, TensorType] | None = None
) -> dict[str, TensorType]:
    """The type of every value of ``graph`` that can be inferred, by name.

    Graph inputs and initializers seed the inference, and for a subgraph body ``outer``, the
    types of the enclosing scopes' values it reads; values whose operator has no schema or
    no inference function stay as the graph declares them. Inference errors name the node.
    """
    if operators is None:
        from ..plugins import operators as loaded

        operators = loaded()
    free = graph.free_names()
    types = {name: outer[name] for name in free if name in outer} if outer else {}
    constants: dict[str, np.ndarray] = dict(graph.initializers)
    for name, array in graph.initializers.items():
        types[name] = TensorType(array.dtype, tuple(array.shape))
    for value in (*graph.value_info.values(), *graph.inputs, *graph.outputs):
        if value.name not in types and (value.dtype is not None or value.shape is not None):
            types[value.name] = TensorType(value.dtype, value.shape)
    for node in graph.toposort(frozenset(free)):
        if node.op_type == "Constant" and not node.domain:
            _record_constant(node, constants)
        for name, inferred in zip(
            node.outputs, _infer_node(node, graph, operators, types, constants), strict=False
        ):
            if name and inferred is not None:
                types[name] = _merge(types.get(name), inferred)
    return types


def _infer_node(
    node: Node,
    graph: Graph,
    operators: OperatorRegistry,
    types: dict[str, TensorType],
    constants: dict[str, np.ndarray],
) -> list[TensorType | None]:
    opset = graph.opset(node.domain)
    schema = operators.lookup(node.domain, node.op_type, opset)
    if schema is None or schema.infer is None:
        return []
    ctx = InferenceContext(
        node=node,
        opset=opset,
        attrs=schema.resolve_attrs(node),
        inputs=[types.get(name) if name else None for name in node.inputs],
        constants=[constants.get(name) if name else None for name in node.inputs],
    )
    try:
        return list(schema.infer(ctx))
    except SpawnMLError as error:
        raise InvalidGraphError(
            f"shape inference failed at node {node.label()!r} ({node.op_type}): {error}"
        ) from error


def _record_constant(node: Node, constants: dict[str, np.ndarray]) -> None:
    if node.outputs:
        constants[node.outputs[0]] = constant_value(node.attrs)


def _merge(declared: TensorType | None, inferred: TensorType) -> TensorType:
    """Prefer what inference found; keep declared facts where inference knows less."""
    if declared is None:
        return inferred
    dtype = inferred.dtype if inferred.dtype is not None else declared.dtype
    if inferred.shape is None or declared.shape is None or len(inferred.shape) != len(declared.shape):
        return TensorType(dtype, inferred.shape if inferred.shape is not None else declared.shape)
    return TensorType(dtype, tuple(map(_merge_dim, inferred.shape, declared.shape)))


def _merge_dim(inferred: Dim, declared: Dim) -> Dim:
    if isinstance(inferred, int) or declared is None:
        return inferred
    if isinstance(declared, int) or inferred is None:
        return declared
    return inferred
