"""Lowering a frozen ``GraphDef`` to the IR: names, constants, layouts, inputs and outputs.

TensorFlow tensors are named ``node`` (output 0) or ``node:k``; IR values keep those names.
``Placeholder`` nodes become the graph's inputs (``PlaceholderWithDefault`` ones with their
default as an initializer, so feeding them is optional) and the outputs of nodes nothing reads
its outputs; ``Const`` nodes are decoded when first read and become initializers only where an
IR node reads them, while shapes, axes and weights are read at load (elementwise operators
on constants are folded at load, so Keras' decomposed batch normalisation becomes one
per-channel scale and shift). Control inputs (``^node``) only order stateful operators and
are dropped.

Layout: TensorFlow's spatial operators default to NHWC, ai.onnx's to NCHW. A rank-4 tensor
may be held channels-first (``Tensor.nchw``), its TensorFlow layout (``Tensor.tf``), or both.
Convolutions and pools write channels-first; elementwise operators, bias additions, batch
normalisation, padding, concatenation and reductions read channels-first inputs as they are
and write channels-first, so a chain of them needs no transpose at all. A transpose is only
emitted where an operator needs the other layout, once per tensor: for MobileNetV2 that is one,
after the input.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from spawnml import Limits, ModelLoadError
from spawnml.graph_builder import GraphBuilder, Mark
from spawnml.ir import Graph, Value
from tensorboard.compat.proto import graph_pb2

from .tensors import decode, dims, element_type

OPSET = 18
DOMAIN = "tensorflow"
TF, NCHW = "tf", "nchw"
TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]
#: Operators that hold or read variables: their graph has not been frozen.
VARIABLES = frozenset(
    {"VariableV2", "Variable", "VarHandleOp", "ReadVariableOp", "AssignVariableOp", "VarIsInitializedOp"}
)
#: Operators that produce no tensor a graph output could be.
NOT_OUTPUTS = frozenset({"Const", "Placeholder", "PlaceholderWithDefault"})


class NotExpressible(Exception):
    """This operator's inputs or attributes have no ai.onnx lowering; keep it as a tensorflow node."""


@dataclass
class Tensor:
    """One TensorFlow tensor as the IR holds it: in its own layout, channels-first, or constant."""

    tf: str | None = None
    nchw: str | None = None
    constant: np.ndarray | None = None
    proto: Any = None  # a Const node's TensorProto, decoded on first read


def tensor_name(node: str, index: int) -> str:
    """TensorFlow's name for output ``index`` of ``node``."""
    return node if index == 0 else f"{node}:{index}"


def parse_input(text: str) -> tuple[str, int] | None:
    """``(node, output)`` of a NodeDef input, or None for a control input (``^node``)."""
    if text.startswith("^"):
        return None
    node, _, index = text.rpartition(":")
    if node and index.isdigit():
        return node, int(index)
    return text, 0


def source_node(name: str) -> str:
    """The node that produces tensor ``name``."""
    parsed = parse_input(name)
    assert parsed is not None
    return parsed[0]


@dataclass
class Op:
    """One NodeDef: its data inputs as tensor names, and typed access to its attributes."""

    node: Any
    inputs: list[str]
    described: str

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def where(self) -> str:
        """The node, for messages: ``'model.pb': Conv2D node 'conv'``."""
        return f"{self.described}: {self.type} node {self.name!r}"

    @property
    def type(self) -> str:
        return self.node.op

    def input(self, position: int) -> str:
        if position >= len(self.inputs):
            raise ModelLoadError(f"{self.where} has {len(self.inputs)} inputs; input {position} is missing")
        return self.inputs[position]

    def attr(self, key: str, default: Any = None, kind: str | None = None) -> Any:
        """An attribute as a Python value (strings decoded, lists as lists), or ``default``.

        The attribute must be of ``kind`` (an ``AttrValue`` field name) or of ``default``'s type.
        """
        if key not in self.node.attr:
            return default
        value = self.node.attr[key]
        found = value.WhichOneof("value")
        if found == "s":
            result = value.s.decode("utf-8", "replace")
        elif found == "list":
            result = []
            for field in ("i", "f", "s", "b", "type"):
                items = list(getattr(value.list, field))
                if items:
                    result = [item.decode("utf-8", "replace") for item in items] if field == "s" else items
                    break
        else:
            result = default if found is None else getattr(value, found)
        if (kind is not None and found != kind) or (
            default is not None and not isinstance(result, type(default))
        ):
            expected = kind or type(default).__name__
            raise ModelLoadError(f"{self.where} has attribute {key!r} of kind {found}, not {expected}")
        return result


class Lowering(GraphBuilder):
    """The graph under construction and the TensorFlow tensors it maps to IR values.

    Node names are reserved: each becomes the name of its first output when lowered.
    """

    def __init__(self, graph_def: graph_pb2.GraphDef, described: str, limits: Limits) -> None:
        super().__init__(
            Graph(opset_imports={"": OPSET}, name="main"), reserved=(node.name for node in graph_def.node)
        )
        self.described, self.limits = described, limits
        self.tensors: dict[str, Tensor] = {}
        self._emitted: set[str] = set()  # outputs of the current operator's own nodes
        self.current = ""

    # -- tensors -----------------------------------------------------------------------------

    def tensor(self, name: str) -> Tensor:
        if name not in self.tensors:
            where = f"{self.described}: node {self.current!r}"
            raise ModelLoadError(f"{where} reads {name!r}, which is not defined")
        return self.tensors[name]

    def constant(self, name: str) -> np.ndarray | None:
        """The value of tensor ``name`` when it is constant (or folded at load)."""
        tensor = self.tensor(name)
        if tensor.proto is not None:
            tensor.constant = decode(tensor.proto, f"constant {name!r} of {self.described}", self.limits)
            tensor.proto = None
        return tensor.constant

    def value(self, name: str) -> str:
        """The IR value of tensor ``name`` in TensorFlow's layout."""
        tensor = self.tensor(name)
        if tensor.tf is None:
            folded = self.constant(name)
            if folded is not None:
                tensor.tf = self.initializer(folded, name)
            else:  # held channels-first only
                nchw = cast(str, tensor.nchw)
                tensor.tf = self._transpose(nchw, self.claim(name), TO_NHWC)
        return tensor.tf

    def channels_first(self, name: str) -> str:
        """The IR value of rank-4 tensor ``name`` as NCHW, transposed once where it is NHWC."""
        tensor = self.tensor(name)
        if tensor.nchw is None:
            folded = self.constant(name)
            if folded is not None:
                tensor.nchw = self.initializer(channels_first(folded), name + "/nchw")
            else:
                output = self.fresh(f"{name}/nchw")
                tensor.nchw = self._transpose(self.value(name), output, TO_NCHW)
        return tensor.nchw

    def layout(self, names: list[str]) -> str:
        """NCHW when every variable input is held channels-first and constants broadcast in rank 4."""
        variables = [name for name in names if self.constant(name) is None]
        constants = [value for name in names if (value := self.constant(name)) is not None]
        if (
            variables
            and all(self.tensor(name).nchw is not None for name in variables)
            and all(value.ndim <= 4 for value in constants)
        ):
            return NCHW
        return TF

    def read(self, name: str, layout: str) -> str:
        return self.channels_first(name) if layout == NCHW else self.value(name)

    def define(self, op: Op, name: str, layout: str = TF, index: int = 0) -> None:
        """Make output ``index`` of ``op`` the IR value ``name``, held in ``layout``."""
        own = tensor_name(op.name, index)
        if layout == TF and name in self._emitted and self.wrote_last(name):
            name = self.rename_last(self.claim(own))
        self.tensors[own] = Tensor(tf=name) if layout == TF else Tensor(nchw=name)

    def fold(self, op: Op, value: np.ndarray, index: int = 0) -> None:
        """Make output ``index`` of ``op`` the constant ``value`` (operators evaluated at load)."""
        self.limits.check_shape(value.shape, op.where)
        self.tensors[tensor_name(op.name, index)] = Tensor(constant=np.asarray(value))

    def alias(self, op: Op, name: str, index: int = 0) -> None:
        """Make output ``index`` of ``op`` the same tensor as ``name`` (Identity and its kin)."""
        self.tensors[tensor_name(op.name, index)] = self.tensor(name)

    # -- nodes -------------------------------------------------------------------------------

    def output_base(self, op_type: str, inputs: list[str]) -> str:
        """Nodes are named after the TensorFlow node they lower."""
        return f"{self.current}/{op_type}"

    def initializer(self, value: np.ndarray, base: str = "", *, name: str = "") -> str:
        """A constant; a ``Const`` node's value keeps the node's own name."""
        if not name and self.is_reserved(base):
            name = self.claim(base)
        return super().initializer(value, base, name=name)

    def ints(self, values: Any, base: str) -> str:
        """An int64 initializer (shapes, pads, axes), named after the current node."""
        return super().ints(values, f"{self.current}/{base}")

    def emit(
        self,
        op_type: str,
        inputs: list[str],
        attrs: dict[str, Any] | None = None,
        *,
        output: str = "",
        domain: str = "",
    ) -> str:
        """Append one node of the current operator's own; :meth:`define` may rename its output."""
        output = super().emit(op_type, inputs, attrs, output=output, domain=domain)
        self._emitted.add(output)
        return output

    def emit_outputs(self, op_type: str, inputs: list[str], count: int, attrs: dict[str, Any]) -> list[str]:
        """Append one node with ``count`` outputs and return their names."""
        outputs = [self.fresh(f"{self.current}/{op_type}:{index}") for index in range(count)]
        return self.add_node(op_type, inputs, outputs, attrs)

    def _transpose(self, x: str, output: str, perm: list[int]) -> str:
        """A layout change, which no operator's :meth:`define` renames."""
        return self.add_node("Transpose", [x], [output], {"perm": perm})[0]

    def start(self, op: Op) -> Mark:
        """Begin lowering ``op``; returns what :meth:`rollback` needs to undo it."""
        self.current, self._emitted = op.name, set()
        return self.checkpoint()

    def rollback(self, mark: Mark) -> set[str]:
        """Undo the nodes, initializers, names and cached layouts of the operator begun at ``mark``."""
        gone = super().rollback(mark)
        for tensor in self.tensors.values():
            tensor.tf = None if tensor.tf in gone else tensor.tf
            tensor.nchw = None if tensor.nchw in gone else tensor.nchw
        return gone

    # -- inputs and outputs ------------------------------------------------------------------

    def placeholder(self, op: Op) -> None:
        """A ``Placeholder`` as a graph input, its unknown dims as None."""
        declared = dims(op.attr("shape", kind="shape")) if "shape" in op.node.attr else None
        shape = None if declared is None else tuple(None if dim < 0 else dim for dim in declared)
        self.tensors[op.name] = Tensor(tf=self.claim(op.name))
        self.graph.inputs.append(Value(op.name, element_type(op.attr("dtype", 0, "type"), op.where), shape))

    def placeholder_with_default(self, op: Op) -> None:
        """A ``PlaceholderWithDefault`` of a constant: a graph input whose initializer is the default."""
        default = self.constant(op.input(0))
        if default is None:
            raise ModelLoadError(f"{op.where} has a default that is not a constant")
        self.placeholder(op)
        self.graph.initializers[op.name] = default

    def const(self, op: Op) -> None:
        """A ``Const``, decoded when something first reads it."""
        proto = op.attr("value", kind="tensor")
        if proto is None:
            raise ModelLoadError(f"{op.where} has no value")
        self.tensors[op.name] = Tensor(proto=proto)

    def output(self, op: Op, name: str) -> None:
        """Tensor ``name`` as a graph output named as in TensorFlow, with its element type."""
        self.current = op.name
        value = self.value(name)
        if value != name or value in self.graph.initializers or self.graph.value(value) is not None:
            value = self.add_node("Identity", [value], [self.claim(name)])[0]
        self.graph.outputs.append(Value(value, output_type(op, name)))

    def keep(self, op: Op, outputs: int) -> None:
        """Keep ``op`` as a ``tensorflow``-domain node, which sessions refuse by name."""
        inputs = [self.value(name) for name in op.inputs]
        names = [self.claim(tensor_name(op.name, index)) for index in range(outputs)]
        self.add_node(op.type, inputs, names, domain=DOMAIN, name=op.name)
        self.graph.opset_imports[DOMAIN] = 1
        for index, name in enumerate(names):
            self.tensors[tensor_name(op.name, index)] = Tensor(tf=name)


def channels_first(value: np.ndarray) -> np.ndarray:
    """A constant that broadcasts against an NHWC tensor, made to broadcast against its NCHW form."""
    if value.ndim == 0:
        return value
    return value.reshape((1,) * (4 - value.ndim) + value.shape).transpose(TO_NCHW)


def lower_graph(graph_def: graph_pb2.GraphDef, described: str, limits: Limits) -> Graph:
    """The IR graph of a frozen GraphDef."""
    from .operators import lower_operator

    limits.check("node count", len(graph_def.node), limits.max_nodes, described)
    variables = Counter(node.op for node in graph_def.node if node.op in VARIABLES)
    if variables:
        found = ", ".join(f"{op} ({count})" for op, count in sorted(variables.items()))
        raise ModelLoadError(
            f"{described} is not frozen: it holds variables ({found}); SpawnML reads frozen GraphDefs, "
            "whose weights are constants (tf.python.framework.convert_to_constants."
            "convert_variables_to_constants_v2 freezes a concrete function)"
        )
    ops, outputs, read = ordered_ops(graph_def, described, limits)
    position = {node.name: index for index, node in enumerate(graph_def.node)}
    lowering = Lowering(graph_def, described, limits)
    for op in ops:
        lowering.current = op.name
        if op.type == "Placeholder":
            lowering.placeholder(op)
        elif op.type == "PlaceholderWithDefault":
            lowering.placeholder_with_default(op)
        elif op.type == "Const":
            lowering.const(op)
        else:
            lower_operator(lowering, op, outputs.get(op.name, 1))
    for op in sorted(ops, key=lambda op: position[op.name]):
        index = 0
        while (
            op.type not in NOT_OUTPUTS
            and op.name not in read
            and tensor_name(op.name, index) in lowering.tensors
        ):
            lowering.output(op, tensor_name(op.name, index))
            index += 1
    lowering.graph.metadata.update({"format": "tensorflow", "producer": str(graph_def.versions.producer)})
    return lowering.graph


def ordered_ops(
    graph_def: graph_pb2.GraphDef, described: str, limits: Limits
) -> tuple[list[Op], dict[str, int], set[str]]:
    """The nodes in an order where each follows its data inputs; output counts; nodes read."""
    nodes: dict[str, Op] = {}
    outputs: dict[str, int] = {}
    for node in graph_def.node:
        limits.check("string length", len(node.name), limits.max_string_length, described)
        if node.name in nodes:
            raise ModelLoadError(f"{described} has two nodes named {node.name!r}")
        inputs = [parsed for parsed in map(parse_input, node.input) if parsed is not None]
        nodes[node.name] = Op(node, [tensor_name(*parsed) for parsed in inputs], described)
        for source, index in inputs:
            outputs[source] = max(outputs.get(source, 1), index + 1)
    read = set()
    waiting: dict[str, int] = {}
    consumers: dict[str, list[str]] = {}
    for name, op in nodes.items():
        sources = {source_node(name) for name in op.inputs}
        for source in sources:
            if source not in nodes:
                raise ModelLoadError(
                    f"{described}: {op.type} node {name!r} reads {source!r}, which no node defines"
                )
            consumers.setdefault(source, []).append(name)
        read |= sources
        waiting[name] = len(sources)
    # Kahn's algorithm, always taking the earliest ready node, so that file order is kept.
    position = {name: index for index, name in enumerate(nodes)}
    ready = [position[name] for name, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[Op] = []
    names = list(nodes)
    while ready:
        op = nodes[names[heapq.heappop(ready)]]
        order.append(op)
        for consumer in consumers.get(op.name, ()):
            waiting[consumer] -= 1
            if waiting[consumer] == 0:
                heapq.heappush(ready, position[consumer])
    if len(order) != len(nodes):
        stuck = sorted(f"{nodes[name].type} {name!r}" for name, count in waiting.items() if count)[:5]
        raise ModelLoadError(
            f"{described} has a cycle through {', '.join(stuck)} (TensorFlow 1 loops); "
            "SpawnML reads graphs without cycles"
        )
    return order, outputs, read


#: Operators whose output type is not their ``T`` attribute.
BOOLEAN_OUTPUTS = frozenset(
    {"Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "LogicalAnd", "LogicalOr", "IsNan"}
)


def output_type(op: Op, name: str) -> np.dtype | None:
    """The element type of an operator's output, from its type attributes."""
    if op.type in BOOLEAN_OUTPUTS:
        return np.dtype(np.bool_)
    for key in ("DstT", "out_type", "output_type", "dtype", "T"):
        if key in op.node.attr:
            return element_type(op.attr(key, kind="type"), f"output {name!r}")
    return None
