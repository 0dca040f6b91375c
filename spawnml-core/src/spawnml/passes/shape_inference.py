"""Shape inference: propagate element types and (symbolic) shapes through a graph."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from ..errors import ShapeInferenceError, SpawnMLError
from ..ir import Dim, Graph, Node
from ..ops.defs.tensor import constant_value
from ..ops.registry import OperatorRegistry
from ..ops.schema import InferenceContext, OpSchema, TensorType

#: What a node's inference found for each output, None where it says nothing.
_Outputs = list[TensorType | None]


class InferenceMemo:
    """What each node's inference found, and from what: inferring a graph again (after a rewrite)
    runs the inference functions only of the nodes whose opset, attributes, inputs, input types or
    constant inputs are not the ones they had. Nodes with subgraphs are always inferred again.

    Attributes and constants are compared by identity: passes replace a node's attribute dict or
    a constant's array to change them, never edit one in place."""

    def __init__(self) -> None:
        #: id(node) -> the node, its attributes, its constant inputs, the rest of what its
        #: inference read, and what it found (the node, attributes and constants are held so
        #: that their ids stay theirs)
        self._found: dict[int, tuple[Node, dict[str, Any], tuple[Any, ...], tuple, _Outputs]] = {}

    def infer(
        self,
        node: Node,
        opset: int,
        inputs: list[TensorType | None],
        constants: list[np.ndarray | None],
        run: Callable[[], _Outputs],
    ) -> _Outputs:
        """``run()``, or what it gave for the same node, opset, inputs and constants before."""
        key = (opset, tuple(node.inputs), tuple(node.outputs), tuple(inputs))
        found = self._found.get(id(node))
        if (
            found is not None
            and found[0] is node
            and found[1] is node.attrs
            and all(map(operator.is_, found[2], constants))
            and found[3] == key
        ):
            return found[4]
        outputs = run()
        if not node.subgraphs():
            self._found[id(node)] = (node, node.attrs, tuple(constants), key, outputs)
        return outputs


def infer_shapes(
    graph: Graph,
    operators: OperatorRegistry | None = None,
    outer: Mapping[str, TensorType] | None = None,
    memo: InferenceMemo | None = None,
) -> dict[str, TensorType]:
    """The type of every value of ``graph`` that can be inferred, by name.

    Graph inputs and initializers seed the inference, and for a subgraph body ``outer``, the
    types of the enclosing scopes' values it reads; values whose operator has no schema or
    no inference function stay as the graph declares them. Inference errors name the node.
    ``memo`` keeps what a previous inference of the graph found for nodes that did not change.
    """
    if operators is None:
        from ..discovery import operators as loaded

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
            node.outputs, _infer_node(node, graph, operators, types, constants, memo), strict=False
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
    memo: InferenceMemo | None,
) -> list[TensorType | None]:
    opset = graph.opset(node.domain)
    schema = operators.lookup(node.domain, node.op_type, opset)
    if schema is None or schema.infer is None:
        return []
    inputs = [types.get(name) if name else None for name in node.inputs]
    values = [constants.get(name) if name else None for name in node.inputs]
    run = partial(_run_inference, schema, node, opset, inputs, values)
    return run() if memo is None else memo.infer(node, opset, inputs, values, run)


def _run_inference(
    schema: OpSchema,
    node: Node,
    opset: int,
    inputs: list[TensorType | None],
    constants: list[np.ndarray | None],
) -> list[TensorType | None]:
    """The schema's inference of ``node``; its errors (attributes included) name the node."""
    try:
        ctx = InferenceContext(node, opset, schema.resolve_attrs(node), inputs, constants)
        assert schema.infer is not None  # _infer_node runs only schemas that infer
        return list(schema.infer(ctx))
    except ShapeInferenceError:
        raise  # a subgraph's node, already named
    except SpawnMLError as error:
        raise ShapeInferenceError(node.label(), node.op_type, node.domain, str(error)) from error


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
