"""Imported models as trainable modules: ``from_onnx`` turns a model file's graph into a
:class:`GraphModule` whose floating-point initializers are parameters and whose forward runs the
graph's nodes as differentiable operations; ``save_onnx`` writes the graph back with the trained
weights. Operators without a differentiable form here are refused by name when the module is
built, not halfway through a forward pass."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..autograd.functions.arith import abs, add, div, exp, log, mul, neg, relu, sigmoid, sqrt, sub, tanh
from ..autograd.functions.linalg import matmul
from ..autograd.functions.movement import permute, reshape
from ..errors import InvalidArgumentError, UnsupportedOperator, UnsupportedOperatorError
from ..ir import Graph, Node
from ..tensor import Tensor, backend_named
from . import functional as F
from .modules.module import Module, Parameter

Attrs = dict[str, Any]
#: An operator's differentiable form: (inputs, resolved attributes) -> outputs. An omitted
#: optional input is None (Gemm's C, Conv's bias), and the rules that take one test for it; the
#: inputs are typed for the usual case of tensors only, as torch types saved tensors.
Rule = Callable[[list[Tensor], Attrs], Tensor]


def _symmetric_pads(attrs: Attrs, spatial: int) -> list[int]:
    if attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise InvalidArgumentError(f"auto_pad={attrs['auto_pad']} is not supported in a GraphModule")
    pads = list(attrs.get("pads") or [0] * 2 * spatial)
    if pads[:spatial] != pads[spatial:]:
        raise InvalidArgumentError(f"asymmetric pads {pads} are not supported in a GraphModule")
    return pads[:spatial]


def _gemm(x: list[Tensor], a: Attrs) -> Tensor:
    left = x[0].t() if a["transA"] else x[0]
    right = x[1].t() if a["transB"] else x[1]
    out = matmul(left, right) * a["alpha"] if a["alpha"] != 1 else matmul(left, right)
    if x[2] is None:
        return out
    return out + (x[2] * a["beta"] if a["beta"] != 1 else x[2])


def _conv(x: list[Tensor], a: Attrs) -> Tensor:
    spatial = x[1].ndim - 2
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[spatial]
    strides, dilations = a.get("strides") or [1] * spatial, a.get("dilations") or [1] * spatial
    return conv(x[0], x[1], x[2], strides, _symmetric_pads(a, spatial), dilations, a["group"])


def _pool(kind: str) -> Rule:
    def rule(x: list[Tensor], a: Attrs) -> Tensor:
        kernel = list(a["kernel_shape"])
        strides, pads = a.get("strides") or [1] * len(kernel), _symmetric_pads(a, len(kernel))
        if kind == "max":
            return F.max_pool2d(
                x[0], kernel, strides, pads, a.get("dilations") or 1, ceil_mode=bool(a["ceil_mode"])
            )
        return F.avg_pool2d(x[0], kernel, strides, pads, bool(a["ceil_mode"]), bool(a["count_include_pad"]))

    return rule


def _flatten(x: list[Tensor], a: Attrs) -> Tensor:
    shape = x[0].shape
    axis = a["axis"] % max(len(shape), 1) if a["axis"] < 0 else a["axis"]
    return reshape(x[0], [math.prod(shape[:axis]), math.prod(shape[axis:])])


def _reshape(x: list[Tensor], a: Attrs) -> Tensor:
    target = [int(d) for d in x[1].numpy()]
    if not a.get("allowzero"):
        target = [x[0].shape[i] if d == 0 else d for i, d in enumerate(target)]
    return reshape(x[0], target)


def _binary(fn: Callable[[Tensor, Tensor], Tensor]) -> Rule:
    return lambda x, a: fn(x[0], x[1])


def _unary(fn: Callable[[Tensor], Tensor]) -> Rule:
    return lambda x, a: fn(x[0])


RULES: dict[str, Rule] = {
    "Gemm": _gemm,
    "MatMul": _binary(matmul),
    "Add": _binary(add),
    "Sub": _binary(sub),
    "Mul": _binary(mul),
    "Div": _binary(div),
    "Relu": _unary(relu),
    "Sigmoid": _unary(sigmoid),
    "Tanh": _unary(tanh),
    "Exp": _unary(exp),
    "Log": _unary(log),
    "Sqrt": _unary(sqrt),
    "Neg": _unary(neg),
    "Abs": _unary(abs),
    "Identity": lambda x, a: x[0],
    "Conv": _conv,
    "MaxPool": _pool("max"),
    "AveragePool": _pool("average"),
    "GlobalAveragePool": lambda x, a: F.adaptive_avg_pool2d(x[0], 1),
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Transpose": lambda x, a: permute(x[0], a.get("perm") or list(range(x[0].ndim))[::-1]),
    "Softmax": lambda x, a: F.softmax(x[0], a["axis"]),
    "LogSoftmax": lambda x, a: F.log_softmax(x[0], a["axis"]),
    "BatchNormalization": lambda x, a: F.batch_norm(x[0], x[3], x[4], x[1], x[2], False, 0.0, a["epsilon"]),
}
#: Inputs that are state, not weights: kept as buffers (BatchNormalization's running statistics).
BUFFER_INPUTS = {"BatchNormalization": (3, 4)}


def _refuse_untrainable(graph: Graph) -> None:
    """Raise, naming every operator, when a node has no differentiable form here (or uses an
    output besides the first, which none of the forms computes)."""
    reasons: dict[tuple[str, str], str] = {}
    for node in graph.nodes:
        if node.domain not in ("", "ai.onnx") or node.op_type not in RULES:
            reasons[node.domain, node.op_type] = "no differentiable form in GraphModule"
        elif any(node.outputs[1:]):
            reasons[node.domain, node.op_type] = "GraphModule computes only the first output"
    if reasons:
        refused = [
            UnsupportedOperator(
                d, op, graph.opset(d), sum(n.op_type == op and n.domain == d for n in graph.nodes), (why,)
            )
            for (d, op), why in sorted(reasons.items())
        ]
        raise UnsupportedOperatorError(refused, ["GraphModule"])


def _safe(name: str) -> str:
    """An attribute name for an initializer (``fc.weight`` -> ``fc_weight``)."""
    return "".join(c if c.isalnum() else "_" for c in name)


class GraphModule(Module):
    """A graph run node by node with autograd; its weights are parameters (and buffers)."""

    def __init__(self, graph: Graph, device: str = "cpu") -> None:
        super().__init__()
        from ..discovery import operators

        registry = operators()
        _refuse_untrainable(graph)
        self.graph = graph
        self._steps: list[tuple[Node, Attrs]] = []
        for node in graph.nodes:
            schema = registry.lookup(node.domain, node.op_type, graph.opset(node.domain))
            if schema is None:
                raise InvalidArgumentError(
                    f"{node.op_type} has no schema at opset {graph.opset(node.domain)} of {node.domain!r}"
                )
            self._steps.append((node, schema.resolve_attrs(node)))
        buffers = {
            n.inputs[i] for n in graph.nodes for i in BUFFER_INPUTS.get(n.op_type, ()) if i < len(n.inputs)
        }
        backend = backend_named(device)
        self._names: dict[str, str] = {}
        for name, array in graph.initializers.items():
            tensor = Tensor(backend.from_numpy(np.array(array)), backend)
            attribute = self._names[name] = _safe(name)
            if array.dtype.kind == "f" and name not in buffers:
                self.register_parameter(attribute, Parameter(tensor))
            else:
                self.register_buffer(attribute, tensor)

    def forward(self, *inputs: Tensor) -> Tensor | tuple[Tensor, ...]:
        """The graph's outputs for its (non-initializer) inputs, in order."""
        feeds = [v.name for v in self.graph.inputs if v.name not in self.graph.initializers]
        if len(inputs) != len(feeds):
            raise InvalidArgumentError(f"the graph takes {len(feeds)} inputs ({feeds}), got {len(inputs)}")
        values: dict[str, Tensor] = dict(zip(feeds, inputs, strict=True))
        for name, attribute in self._names.items():
            values[name] = getattr(self, attribute)
        for node, attrs in self._steps:
            # None for an omitted optional input (see Rule).
            args: list[Tensor] = [values[name] if name else None for name in node.inputs]  # type: ignore[misc]
            values[node.outputs[0]] = RULES[node.op_type](args, attrs)
        outputs = tuple(values[v.name] for v in self.graph.outputs)
        return outputs[0] if len(outputs) == 1 else outputs

    def to_graph(self) -> Graph:
        """The graph with the module's current weights as its initializers."""
        weights = {name: getattr(self, attribute).detach().numpy() for name, attribute in self._names.items()}
        return dataclasses.replace(self.graph, initializers=weights)

    def save_onnx(self, path: str | os.PathLike[str]) -> None:
        """Write the graph with the current weights as an ONNX file."""
        from ..formats import save_onnx

        save_onnx(self.to_graph(), path)


def from_onnx(model: str | os.PathLike[str] | bytes, device: str = "cpu") -> GraphModule:
    """A trainable module from a model file (ONNX, or any format ``spawnml.load`` reads)."""
    from ..formats import load

    return GraphModule(load(model), device)
