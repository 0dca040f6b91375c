"""Fine-tune an imported model: an ONNX graph as a :class:`Module` whose weights are parameters.

``from_onnx(path)`` loads the graph; its float initializers become parameters (named after
them, with ``.`` and other separators as ``_``), the rest stay constants. ``forward`` runs the
nodes in order through the differentiable functions of the same meaning, so gradients reach
the weights; ``save_onnx`` writes the graph back with the current weights, for onnxruntime or
any other ONNX runtime. Nodes whose inputs need no gradient (shape arithmetic) run as they
are; an operator without a differentiable form that a gradient must cross is refused with
the list of those that have one.
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..autograd import dispatch
from ..autograd.functions import arith, linalg, movement, pointwise, reduce, shape
from ..errors import InvalidArgumentError, UnsupportedOperator, UnsupportedOperatorError
from ..formats import load, save_onnx
from ..ir import Graph, Node
from ..tensor import Tensor
from . import functional as F
from .modules.module import Module, Parameter

Handler = Callable[..., Any]
_HANDLERS: dict[str, Handler] = {}


def _handles(*op_types: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for op_type in op_types:
            _HANDLERS[op_type] = fn
        return fn

    return register


def _host_ints(x: Tensor) -> list[int]:
    return [int(v) for v in np.asarray(x.detach().numpy()).reshape(-1)]


@_handles("Gemm")
def _gemm(attrs: dict[str, Any], a: Tensor, b: Tensor, c: Tensor | None = None) -> Tensor:
    a = movement.t(a) if attrs.get("transA") else a
    b = movement.t(b) if attrs.get("transB") else b
    y = linalg.matmul(a, b) * attrs.get("alpha", 1.0)
    return y if c is None else y + c * attrs.get("beta", 1.0)


_ELEMENTWISE: dict[str, Handler] = {
    "MatMul": linalg.matmul,
    "Add": arith.add,
    "Sub": arith.sub,
    "Mul": arith.mul,
    "Div": arith.div,
    "Pow": arith.pow,
    "Relu": arith.relu,
    "Sigmoid": arith.sigmoid,
    "Tanh": arith.tanh,
    "Exp": arith.exp,
    "Log": arith.log,
    "Sqrt": arith.sqrt,
    "Neg": arith.neg,
    "Abs": arith.abs,
    "Erf": pointwise.erf,
    "Identity": lambda x: x,
}
for _op, _fn in _ELEMENTWISE.items():
    _HANDLERS[_op] = lambda attrs, *xs, _fn=_fn: _fn(*xs)


@_handles("Dropout")
def _dropout(attrs: dict[str, Any], x: Tensor, *_: Tensor | None) -> Tensor:
    return x  # inference semantics: the exported graph is used for inference


@_handles("Softmax", "LogSoftmax")
def _softmax(attrs: dict[str, Any], x: Tensor, *, op: str = "Softmax") -> Tensor:
    return F.softmax(x, attrs["axis"]) if op == "Softmax" else F.log_softmax(x, attrs["axis"])


@_handles("Conv")
def _conv(attrs: dict[str, Any], x: Tensor, w: Tensor, b: Tensor | None = None) -> Tensor:
    rank = w.ndim - 2
    if attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise InvalidArgumentError(f"Conv with auto_pad={attrs['auto_pad']!r} is not supported for training")
    pads = attrs.get("pads", [0] * 2 * rank)
    if pads[:rank] != pads[rank:]:
        x = shape.pad(x, [p for i in reversed(range(rank)) for p in (pads[i], pads[rank + i])])
        pads = [0] * 2 * rank
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[rank]
    return conv(
        x,
        w,
        b,
        stride=attrs.get("strides", [1] * rank),
        padding=pads[:rank],
        dilation=attrs.get("dilations", [1] * rank),
        groups=attrs.get("group", 1),
    )


@_handles("MaxPool", "AveragePool")
def _pool(attrs: dict[str, Any], x: Tensor, *, op: str = "MaxPool") -> Tensor:
    kernel = attrs["kernel_shape"]
    rank = len(kernel)
    pads = attrs.get("pads", [0] * 2 * rank)
    if pads[:rank] != pads[rank:] or rank != 2:
        raise InvalidArgumentError(f"{op} is supported for training in 2-D with symmetric pads only")
    stride = attrs.get("strides", [1] * rank)
    ceil = bool(attrs.get("ceil_mode", 0))
    if op == "MaxPool":
        return F.max_pool2d(
            x, kernel, stride, pads[:rank], attrs.get("dilations", [1] * rank), ceil_mode=ceil
        )
    return F.avg_pool2d(x, kernel, stride, pads[:rank], ceil, bool(attrs.get("count_include_pad", 0)))


@_handles("GlobalAveragePool")
def _global_average(attrs: dict[str, Any], x: Tensor) -> Tensor:
    return reduce.mean(x, list(range(2, x.ndim)), keepdim=True)


@_handles("BatchNormalization")
def _batch_norm(
    attrs: dict[str, Any], x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor
) -> Tensor:
    return F.batch_norm(x, mean, var, scale, bias, training=False, eps=attrs.get("epsilon", 1e-5))


@_handles("LayerNormalization")
def _layer_norm(attrs: dict[str, Any], x: Tensor, scale: Tensor, bias: Tensor | None = None) -> Tensor:
    axis = attrs.get("axis", -1) % x.ndim
    return F.layer_norm(x, list(x.shape[axis:]), scale, bias, attrs.get("epsilon", 1e-5))


@_handles("Flatten")
def _flatten(attrs: dict[str, Any], x: Tensor) -> Tensor:
    axis = attrs.get("axis", 1) % (x.ndim + 1) if x.ndim else 0
    return movement.reshape(x, [math.prod(x.shape[:axis]), math.prod(x.shape[axis:])])


@_handles("Reshape")
def _reshape(attrs: dict[str, Any], x: Tensor, target: Tensor) -> Tensor:
    dims = _host_ints(target)
    if not attrs.get("allowzero", 0):
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return movement.reshape(x, dims)


@_handles("Transpose")
def _transpose(attrs: dict[str, Any], x: Tensor) -> Tensor:
    return movement.permute(x, attrs.get("perm", list(range(x.ndim))[::-1]))


@_handles("Concat")
def _concat(attrs: dict[str, Any], *xs: Tensor) -> Tensor:
    return shape.cat(list(xs), attrs["axis"])


@_handles("Unsqueeze", "Squeeze")
def _squeeze(attrs: dict[str, Any], x: Tensor, axes: Tensor | None = None, *, op: str = "Squeeze") -> Tensor:
    given = _host_ints(axes) if axes is not None else attrs.get("axes")
    if op == "Squeeze":
        return movement.squeeze(x, given) if given is not None else movement.squeeze(x)
    for axis in sorted(a % (x.ndim + len(given)) for a in given):
        x = movement.unsqueeze(x, axis)
    return x


#: Handlers that need the operator's name (one function for a family).
_NAMED = {"Softmax", "LogSoftmax", "MaxPool", "AveragePool", "Unsqueeze", "Squeeze"}


def _parameter_name(initializer: str) -> str:
    name = re.sub(r"\W", "_", initializer)
    return name if name and not name[0].isdigit() else "p_" + name


class OnnxModule(Module):
    """An ONNX graph run as a module: float initializers are parameters, gradients flow to them."""

    def __init__(self, graph: Graph) -> None:
        super().__init__()
        from ..plugins import operators

        self.graph = graph
        self._operators = operators()
        self._names: dict[str, str] = {}  # initializer -> parameter name
        self._constants: dict[str, np.ndarray] = {}
        for name, value in graph.initializers.items():
            array = np.asarray(value)
            if array.dtype.kind == "f":
                key = _parameter_name(name)
                if key in self._parameters:
                    raise InvalidArgumentError(f"initializers {name!r} and another map to parameter {key!r}")
                self._names[name] = key
                self.register_parameter(key, Parameter(Tensor.from_numpy(np.array(array, copy=True))))
            else:
                self._constants[name] = array

    def forward(self, *inputs: Tensor) -> Tensor | tuple[Tensor, ...]:
        graph = self.graph
        if len(inputs) != len(graph.inputs):
            raise InvalidArgumentError(
                f"the graph takes {len(graph.inputs)} inputs ({[v.name for v in graph.inputs]}), "
                f"got {len(inputs)}"
            )
        device = inputs[0].device if inputs else "cpu"
        values: dict[str, Tensor] = {v.name: x for v, x in zip(graph.inputs, inputs, strict=True)}
        for name, key in self._names.items():
            values[name] = self._parameters[key]
        for name, array in self._constants.items():
            values[name] = Tensor.from_numpy(array, device)
        for node in graph.nodes:
            args = [values[name] if name else None for name in node.inputs]
            for name, result in zip(node.outputs, self._run(node, args), strict=False):
                if name and result is not None:
                    values[name] = result
        outputs = tuple(values[v.name] for v in graph.outputs)
        return outputs[0] if len(outputs) == 1 else outputs

    def _run(self, node: Node, args: Sequence[Tensor | None]) -> Sequence[Tensor | None]:
        opset = self.graph.opset(node.domain)
        schema = self._operators.lookup(node.domain, node.op_type, opset)
        attrs = schema.resolve_attrs(node) if schema is not None else dict(node.attrs)
        handler = _HANDLERS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if handler is not None:
            named = {"op": node.op_type} if node.op_type in _NAMED else {}
            result = handler(attrs, *args, **named)
            return result if isinstance(result, tuple) else (result,)
        if any(x is not None and x.requires_grad for x in args):
            raise UnsupportedOperatorError(
                [
                    UnsupportedOperator(
                        node.domain,
                        node.op_type,
                        opset,
                        1,
                        (f"no gradient in spawnml.nn.from_onnx; differentiable: {sorted(_HANDLERS)}",),
                    )
                ],
                [args[0].device if args and args[0] is not None else "cpu"],
            )
        dispatch.OPSETS.setdefault(node.domain, opset)
        result = dispatch.run(
            node.op_type, list(args), outputs=len(node.outputs), domain=node.domain, **node.attrs
        )
        return result if isinstance(result, tuple) else (result,)

    def to_graph(self) -> Graph:
        """The graph with the current parameter values as its initializers."""
        graph = copy.copy(self.graph)
        graph.initializers = dict(self.graph.initializers)
        for name, key in self._names.items():
            parameter = self._parameters[key]
            graph.initializers[name] = (
                parameter.detach().cpu().numpy().astype(np.asarray(self.graph.initializers[name]).dtype)
            )
        return graph

    def save_onnx(self, path: str | os.PathLike[str]) -> None:
        """Write the graph with the current weights as an ONNX file (needs the ONNX format plugin)."""
        save_onnx(self.to_graph(), path)


def from_onnx(model: str | os.PathLike[str] | bytes | Graph) -> OnnxModule:
    """A trainable module from an ONNX file (or bytes, or a loaded graph)."""
    return OnnxModule(model if isinstance(model, Graph) else load(model))
