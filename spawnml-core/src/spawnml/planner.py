"""The planner: assign every node to a provider, and run the resulting plan.

Each node goes to the first provider (in priority order) that runs it. Anything no
provider runs is collected over the whole graph, subgraphs included, and refused at
once with :class:`UnsupportedOperatorError`; a node whose schema refuses its inputs (shape
inference) is refused with :class:`ShapeInferenceError`. Values crossing providers are transferred
explicitly and each transfer is listed in the plan; values are released after their
last use.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from . import dtypes
from .backend import Backend, KernelContext, KernelSpec
from .errors import (
    DeviceError,
    ExecutionError,
    InvalidArgumentError,
    InvalidGraphError,
    SpawnMLError,
    UnsupportedOperator,
    UnsupportedOperatorError,
)
from .ir import Graph, Node
from .ops.registry import OperatorRegistry
from .ops.schema import TensorType
from .ops.tool_written import missing_schema_reason
from .passes.shape_inference import InferenceMemo, infer_shapes
from .profiler import NODE, Profiler
from .tensor import EMPTY_OPTIONAL, TensorSequence

if TYPE_CHECKING:
    from .plan_compiler import CompiledPlan

#: A value at run time: the buffer (or sequence, or empty optional) and the backend that holds it.
Placed = tuple[Any, Backend]
#: What a kernel returns when it has several results.
_SEQUENCES = (tuple, list)


@dataclass(frozen=True)
class Transfer:
    """A value copied from one provider to another before a node reads it."""

    value: str
    source: str
    target: str
    node: str


@dataclass
class Step:
    """One prepared kernel call."""

    node: Node
    backend: Backend
    kernel: KernelSpec
    attrs: dict[str, Any]
    opset: int
    release: list[str] = field(default_factory=list)  # values whose last reader this is
    bodies: dict[int, Plan] = field(default_factory=dict)  # id(subgraph) -> its plan
    #: Per input: its name ("" where omitted) and, for an initializer no feed can replace, its
    #: buffer on this step's backend (else None).
    reads: tuple[tuple[str, Any], ...] = ()
    #: The kernel's context, made once where the node has no subgraph to run.
    context: KernelContext | None = None
    #: The results, computed once at planning, of a node that gives the same ones every run.
    results: tuple[Any, ...] | None = None


@dataclass
class Plan:
    """A graph compiled for a list of providers: steps in order, transfers, constants."""

    graph: Graph
    steps: list[Step]
    transfers: list[Transfer]
    constants: dict[tuple[str, str], Any]  # (value name, backend name) -> device buffer
    host: Backend  # where values not read by any node (e.g. initializer outputs) are placed
    #: Where each graph input is placed when fed from the host: the provider of its first reader.
    feed_homes: dict[str, Backend] = field(default_factory=dict)
    #: Set while the session profiles: every run then times each step (see :meth:`_run_profiled`).
    profiler: Profiler | None = None
    #: What shape inference found of the graph's values, for :mod:`.plan_compiler`'s kernel choice.
    types: Mapping[str, TensorType] = field(default_factory=dict)
    #: The plan compiled to one function (see :mod:`.plan_compiler`), from its second run on.
    compiled: CompiledPlan | None = field(default=None, repr=False)
    #: Runs begun, until the plan is compiled: a plan run once (constant folding) is never compiled.
    runs: int = field(default=0, repr=False)

    def placement(self) -> list[tuple[str, str, str]]:
        """``(node label, op_type, provider)`` for every node, in execution order."""
        return [(s.node.label(), s.node.op_type, s.backend.name) for s in self.steps]

    def run(
        self, feeds: Mapping[str, Placed], outputs: Sequence[str], parent: Scope | None = None
    ) -> list[Placed]:
        """Execute the plan; ``parent`` is the scope of the enclosing graph (for subgraphs).

        From the second run on, unprofiled runs call the compiled plan where it takes the feeds
        (each at its home, none missing) and the outputs asked for; the steps' loop runs the rest.
        """
        with np.errstate(all="ignore"):  # kernels give IEEE results (inf, NaN) as ONNX does, silently
            if self.profiler is None:  # chosen once a run: neither way of running has timing in it
                compiled = self.compiled or self._compile_after_first_run()
                if compiled is not None:
                    results = compiled.run(self, feeds, outputs, parent)
                    if results is not None:
                        return results
            scope = Scope(self, dict(feeds), parent)
            if self.profiler is None:
                self._run_steps(scope, self.steps)
            else:
                self._run_profiled(scope, self.profiler)
        return [scope.lookup(name) for name in outputs]

    def _compile_after_first_run(self) -> CompiledPlan | None:
        """The compiled plan from the second run on (None before): compiling costs more than a
        run of the steps, so a plan run once is not compiled. Threads racing here compile the
        same function twice, harmlessly."""
        self.runs += 1
        if self.runs < 2:
            return None
        from .plan_compiler import compile_plan  # it builds on this module

        self.compiled = compile_plan(self)
        return self.compiled

    def _run_profiled(self, scope: Scope, profiler: Profiler) -> None:
        """Run the steps one by one, recording each as a node event (host time: a GPU kernel's
        launch, not its completion). Shapes are read outside the timed span."""
        depth, outer = 0, scope.parent
        while outer is not None:
            depth, outer = depth + 1, outer.parent
        for step in self.steps:
            inputs = [_type_shape(_read_value(scope, step, index)) for index in range(len(step.reads))]
            start = profiler.now()
            self._run_steps(scope, (step,))
            end = profiler.now()
            node = step.node
            outputs = [_type_shape(scope.values.get(name)) for name in node.outputs if name]
            profiler.record(
                node.label(),
                NODE,
                start,
                end,
                op_name=node.op_type,
                provider=step.backend.name,
                input_type_shape=inputs,
                output_type_shape=outputs,
                depth=depth,
            )

    def _run_steps(self, scope: Scope, steps: Sequence[Step]) -> None:
        values = scope.values
        for step in steps:
            backend = step.backend
            try:
                args = []
                for name, constant in step.reads:
                    if constant is not None or not name:
                        args.append(constant)
                        continue
                    placed = values.get(name)
                    same = placed is not None and placed[1] is backend
                    args.append(placed[0] if placed is not None and same else scope.fetch(name, backend))
                results = step.results or call_kernel(step, args, scope)
            except DeviceError as error:
                raise_device_error(step, error)
            for name, result in zip(step.node.outputs, results, strict=False):
                if name and result is not None:
                    values[name] = (result, backend)
            for name in step.release:
                values.pop(name, None)


def _read_value(scope: Scope, step: Step, index: int) -> Placed | None:
    """Input ``index`` of ``step`` where it lies now, if it is at hand (not in an outer scope)."""
    name, constant = step.reads[index]
    if constant is not None:
        return constant, step.backend
    return scope.values.get(name) if name else None


def _type_shape(placed: Placed | None) -> dict[str, Any]:
    """A value's element type and shape as onnxruntime's profiles write them: ``{"float": [1, 3]}``."""
    if placed is None or placed[0] is EMPTY_OPTIONAL:
        return {}
    buffer, backend = placed
    if isinstance(buffer, TensorSequence):
        return {f"seq({dtypes.name(buffer.dtype)})": [len(buffer.items)]}
    return {dtypes.name(backend.dtype_of(buffer)): list(backend.shape_of(buffer))}


def call_kernel(step: Step, args: Sequence[Any], scope: Scope | None) -> Sequence[Any]:
    """Run one step's kernel; its results as a sequence."""
    try:
        result = step.kernel.fn(step.context or _context_with_bodies(step, scope), *args)
    except Exception as error:
        raise_kernel_error(step, error)
    return result if isinstance(result, _SEQUENCES) else (result,)


def raise_kernel_error(step: Step, error: Exception) -> NoReturn:
    """Raise what a kernel of ``step`` raised, told the node: a refusal of its arguments with the
    node named, another library's error as :class:`ExecutionError`, SpawnML's own as it is."""
    node = step.node
    if type(error) in (InvalidArgumentError, InvalidGraphError) and node.label() not in str(error):
        # a kernel's own refusal of its arguments: say where it happened
        raise type(error)(
            f"node {node.label()!r} ({node.op_type}) on {step.backend.name!r}: {error}"
        ) from error
    if isinstance(error, SpawnMLError):
        raise error
    raise ExecutionError(node.label(), node.op_type, step.backend.name, error) from error


def raise_device_error(step: Step, error: DeviceError) -> NoReturn:
    """Raise a device's failure while running ``step``, naming the node and the values it makes."""
    node, made = step.node, ", ".join(repr(name) for name in step.node.outputs if name)
    where = f"node {node.label()!r} ({node.op_type}, making {made}) on {step.backend.name!r}"
    raise error.at(where) from error.__cause__


def _context_with_bodies(step: Step, scope: Scope | None) -> KernelContext:
    """The context of a node with subgraphs: they run in a scope under the running one."""

    def run_subgraph(body: Graph, feeds: dict[str, Any]) -> list[Any]:
        placed = {name: (value, step.backend) for name, value in feeds.items()}
        results = step.bodies[id(body)].run(placed, [v.name for v in body.outputs], scope)
        return [move(buffer, source, step.backend) for buffer, source in results]

    return KernelContext(step.node, step.opset, step.attrs, step.backend, run_subgraph)


@dataclass
class Scope:
    """The values of one running graph, falling back to its constants and enclosing scopes."""

    plan: Plan
    values: dict[str, Placed]
    parent: Scope | None = None

    def fetch(self, name: str, backend: Backend) -> Any:
        """The value as a buffer on ``backend``, transferred there if needed."""
        constant = self.plan.constants.get((name, backend.name))
        if constant is not None and name not in self.values:
            return constant
        buffer, source = self.lookup(name, backend)
        return move(buffer, source, backend)

    def lookup(self, name: str, near: Backend | None = None) -> Placed:
        """The value wherever it lives; initializers are placed on ``near`` (or the host)."""
        if name in self.values:
            return self.values[name]
        if name in self.plan.graph.initializers:
            backend = near or self.plan.host
            buffer = self.plan.constants.get((name, backend.name))
            if buffer is None:
                buffer = backend.from_numpy(read_only(self.plan.graph.initializers[name]))
            return buffer, backend
        if self.parent is not None:
            return self.parent.lookup(name, near)
        raise InvalidGraphError(f"value {name!r} is not available in graph {self.plan.graph.name!r}")


def move(buffer: Any, source: Backend, target: Backend) -> Any:
    """The value on ``target``: a buffer copied, a sequence item by item, an empty optional as is."""
    if source is target or buffer is EMPTY_OPTIONAL:
        return buffer
    if isinstance(buffer, TensorSequence):
        return TensorSequence(tuple(move(item, source, target) for item in buffer.items), buffer.dtype)
    return target.from_numpy(source.to_numpy(buffer))


def build_plan(
    graph: Graph, providers: Sequence[Backend], operators: OperatorRegistry, memo: InferenceMemo | None = None
) -> Plan:
    """Plan ``graph`` on ``providers``; raise :class:`UnsupportedOperatorError` listing every gap.

    ``memo`` holds what an earlier inference of the graph found (the optimizer's).
    """
    missing: dict[tuple[str, str, int], list[str]] = {}
    counts: Counter[tuple[str, str, int]] = Counter()
    bodies = [body for node, _ in graph.walk() for body in node.subgraphs()]
    for body in bodies:  # planning only reads the graph: each body's free names are found once
        body.remember_free_names()
    try:
        types = _known_types(graph, operators, memo)
        plan = _plan_graph(
            graph, providers, operators, graph.opset_imports, frozenset(), missing, counts, types
        )
    finally:
        for body in bodies:
            body.remember_free_names(False)
    if missing:
        raise UnsupportedOperatorError(
            [
                UnsupportedOperator(
                    domain, op, opset, counts[(domain, op, opset)], tuple(dict.fromkeys(reasons))
                )
                for (domain, op, opset), reasons in sorted(missing.items())
            ],
            [backend.name for backend in providers],
        )
    return plan


def _plan_graph(
    graph: Graph,
    providers: Sequence[Backend],
    operators: OperatorRegistry,
    opsets: Mapping[str, int],
    outer: frozenset[str],
    missing: dict[tuple[str, str, int], list[str]],
    counts: Counter[tuple[str, str, int]],
    types: Mapping[str, TensorType],
) -> Plan:
    steps: list[Step] = []
    visible: frozenset[str] = frozenset()  # names a subgraph may read: found at the first one
    for node in graph.toposort(outer):
        domain = "" if node.domain == "ai.onnx" else node.domain
        opset = opsets.get(domain, 1)
        schema = operators.lookup(domain, node.op_type, opset)
        if schema is None:
            key = (domain, node.op_type, opset)
            counts[key] += 1
            missing.setdefault(key, []).append(missing_schema_reason(domain, node.op_type))
            continue
        schema.check_arity(node)
        attrs = schema.resolve_attrs(node)
        chosen, reasons = _choose(node, opset, providers, types)
        bodies = {}
        for body in node.subgraphs():
            visible = visible or outer | graph.defined_names()
            bodies[id(body)] = _plan_graph(body, providers, operators, opsets, visible, missing, counts, {})
        if chosen is None:
            key = (domain, node.op_type, opset)
            counts[key] += 1
            missing.setdefault(key, []).extend(reasons)
            continue
        kernel = chosen.kernels.find(domain, node.op_type, opset)
        assert kernel is not None  # _choose only picks backends with a kernel
        steps.append(Step(node, chosen, kernel, attrs, opset, bodies=bodies))
    reads = [_reads(step.node) for step in steps]
    _mark_releases(graph, steps, reads)
    constants = _constants(graph, steps, reads)
    _prepare_calls(graph, steps, constants)
    homes = _feed_homes(graph, steps, reads, providers[0])
    return Plan(graph, steps, _transfers(graph, steps, homes), constants, providers[0], homes, types=types)


def _known_types(
    graph: Graph, operators: OperatorRegistry, memo: InferenceMemo | None
) -> Mapping[str, TensorType]:
    """What shape inference knows of the graph's values.

    A schema that refuses its node raises :class:`ShapeInferenceError` here, at load: planning
    on without the types would let a kernel's dtype guard pass a model its operator rejects, and
    the session would run and return wrong results.
    """
    return infer_shapes(graph, operators, memo=memo)


def _choose(
    node: Node, opset: int, providers: Sequence[Backend], types: Mapping[str, TensorType]
) -> tuple[Backend | None, list[str]]:
    inputs = [types[name].dtype if name in types else None for name in node.inputs]
    outputs = [types[name].dtype if name in types else None for name in node.outputs]
    reasons = []
    for backend in providers:
        reason = backend.unsupported_reason(node, opset, inputs, outputs)
        if reason is None:
            return backend, []
        reasons.append(f"{backend.name}: {reason}")
    return None, reasons


def _mark_releases(graph: Graph, steps: list[Step], reads: list[set[str]]) -> None:
    """Record after which step each intermediate value can be dropped (``reads``: what each step reads)."""
    keep = {value.name for value in graph.outputs}
    last_reader: dict[str, int] = {}
    for index, names in enumerate(reads):
        for name in names:
            last_reader[name] = index
    for name, index in last_reader.items():
        if name not in keep:
            steps[index].release.append(name)


def _prepare_calls(graph: Graph, steps: list[Step], constants: dict[tuple[str, str], Any]) -> None:
    """Resolve what each run would otherwise look up per node: kernel contexts, the results of
    Constant nodes (computed here, once, and kept with the plan's constants) and constant inputs."""
    for step in steps:
        if not step.bodies:
            step.context = KernelContext(step.node, step.opset, step.attrs, step.backend)
    returned = {value.name for value in graph.outputs}  # a caller may write into what it gets
    for step in steps:
        node = step.node
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.outputs[0] not in returned:
            step.results = tuple(read_only(result) for result in call_kernel(step, [], None))
            constants[node.outputs[0], step.backend.name] = step.results[0]
    feedable = {value.name for value in graph.inputs}
    for step in steps:
        backend = step.backend.name
        step.reads = tuple(
            (name, None if name in feedable else constants.get((name, backend))) for name in step.node.inputs
        )


def _reads(node: Node) -> set[str]:
    names = {name for name in node.inputs if name}
    for body in node.subgraphs():
        names |= body.free_names()
    return names


def _feed_homes(graph: Graph, steps: list[Step], reads: list[set[str]], first: Backend) -> dict[str, Backend]:
    """Each graph input's provider: that of the first step reading it (``first`` if none does), so
    a feed only one provider holds (strings, on the CPU) or reads goes straight there."""
    first_readers: dict[str, Backend] = {}
    for step, names in zip(steps, reads, strict=True):
        for name in names:
            first_readers.setdefault(name, step.backend)
    return {value.name: first_readers.get(value.name, first) for value in graph.inputs}


def _transfers(graph: Graph, steps: list[Step], homes: Mapping[str, Backend]) -> list[Transfer]:
    """Values read on another provider than the one holding them (feeds start at their home)."""
    producer = {
        value.name: homes[value.name].name for value in graph.inputs if value.name not in graph.initializers
    }
    producer.update({name: step.backend.name for step in steps for name in step.node.outputs})
    found = []
    for step in steps:
        for name in step.node.inputs:
            source = producer.get(name)
            if source is not None and source != step.backend.name:
                found.append(Transfer(name, source, step.backend.name, step.node.label()))
    return found


def _constants(graph: Graph, steps: list[Step], reads: list[set[str]]) -> dict[tuple[str, str], Any]:
    """Initializers uploaded once to every backend that reads them, read-only.

    Read-only, because a kernel may return a view of its input (Reshape, Identity): a
    caller writing into such an output must not change the model's weights.
    """
    readers: dict[str, set[Backend]] = defaultdict(set)
    for step, names in zip(steps, reads, strict=True):
        for name in names:
            if name in graph.initializers:
                readers[name].add(step.backend)
    constants = {}
    for name, backends in readers.items():
        for backend in backends:
            try:
                constants[name, backend.name] = backend.from_numpy(read_only(graph.initializers[name]))
            except DeviceError as error:
                raise error.at(f"initializer {name!r} on {backend.name!r}") from error.__cause__
    return constants


def read_only(array: Any) -> Any:
    """A read-only view of a host array; other buffers (device memory) as they are."""
    if not isinstance(array, np.ndarray):
        return array
    view = array.view()
    view.flags.writeable = False
    return view
