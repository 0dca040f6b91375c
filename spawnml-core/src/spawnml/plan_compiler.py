"""Plans compiled to straight-line Python, so that a node costs its kernel and little more.

Run step by step, a :class:`~spawnml.planner.Plan` looks every input up in a dict, checks where
it lies, normalizes the kernel's results and stores them back: far more host time than a small
kernel takes. :func:`compile_plan` writes the plan out once as the source of one function —
every value a local variable, every kernel called with its context and its constant arguments
bound ahead, transfers placed where the plan says they happen, every value deleted after its last
reader — and compiles it with :func:`compile`.

A kernel may also give a *direct call* for a node (:func:`specialize`): a callable taking the
inputs alone, chosen once from the node's attributes and the types shape inference found, where it
computes exactly what the kernel would (numpy's ``add`` for a float32 ``Add``). The compiled plan
then calls it in place of the kernel.

The steps' loop stays what runs a plan the first time, while it is profiled, and where the
compiled function declines the feeds (a feed missing, or lying on another device than its home).
Errors name the node as the loop's do: the line an error came through tells the step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .backend import Backend, KernelContext
from .errors import DeviceError
from .ops.schema import TensorType
from .planner import (
    Placed,
    Plan,
    Scope,
    Step,
    call_kernel,
    move,
    raise_device_error,
    raise_kernel_error,
    read_only,
)


@dataclass(frozen=True)
class Direct:
    """A kernel call bound ahead: ``fn(*inputs, *extra)`` gives the node's one result."""

    fn: Callable[..., Any]
    extra: tuple[Any, ...] = ()


#: ``specializer(ctx, input_types, output_types)``: the direct call for a node (None where the
#: kernel itself must run). Types are shape inference's, None where it found nothing.
Specializer = Callable[
    [KernelContext, Sequence[TensorType | None], Sequence[TensorType | None]], Direct | None
]
_SPECIALIZERS: dict[Callable[..., Any], Specializer] = {}


def specialize(kernel: Callable[..., Any], specializer: Specializer) -> None:
    """Let compiled plans call ``specializer``'s direct call in place of ``kernel`` where it gives one."""
    _SPECIALIZERS[kernel] = specializer


@dataclass(frozen=True)
class CompiledPlan:
    """A plan as one function of its feeds (and the enclosing scope), giving every graph output."""

    #: ``function(plan, feeds, parent)``: the plan is an argument, not bound, so that a plan and
    #: its compiled function make no reference cycle (a closed session's buffers go at once).
    function: Callable[[Plan, Mapping[str, Placed], Scope | None], tuple[Placed, ...] | None]
    #: Each graph output's place in the function's results.
    positions: Mapping[str, int]
    #: The graph's output names.
    names: frozenset[str]

    def run(
        self, plan: Plan, feeds: Mapping[str, Placed], outputs: Sequence[str], parent: Scope | None
    ) -> list[Placed] | None:
        """The outputs of ``plan`` (the one compiled) asked for, or None where the function
        declines the feeds or an output is not the graph's (the steps' loop then runs)."""
        positions = self.positions
        if not self.names.issuperset(outputs):
            return None
        results = self.function(plan, feeds, parent)
        return None if results is None else [results[positions[name]] for name in outputs]


def compile_plan(plan: Plan) -> CompiledPlan:
    """Write ``plan`` out as one function and compile it."""
    writer = _Writer(plan)
    source = writer.source()
    namespace = dict(writer.bound)
    exec(compile(source, f"<plan {plan.graph.name!r}>", "exec"), namespace)
    positions = {value.name: index for index, value in enumerate(plan.graph.outputs)}
    return CompiledPlan(namespace["run"], positions, frozenset(positions))


def direct_call(step: Step, types: Mapping[str, TensorType]) -> Direct | None:
    """The direct call the step's kernel gives for its node, if any."""
    specializer = _SPECIALIZERS.get(step.kernel.fn)
    node = step.node
    if specializer is None or step.context is None or step.results is not None or len(node.outputs) != 1:
        return None
    return specializer(step.context, _types(node.inputs, types), _types(node.outputs, types))


def _types(names: Sequence[str], types: Mapping[str, TensorType]) -> list[TensorType | None]:
    return [types.get(name) if name else None for name in names]


#: The sequence types a kernel returns several results in (as the steps' loop reads them).
_SEQUENCES = (tuple, list)


def spread(result: Any, count: int) -> tuple[Any, ...]:
    """A kernel's results for a node of ``count`` outputs, None for those it did not give."""
    results = tuple(result) if isinstance(result, _SEQUENCES) else (result,)
    return results[:count] + (None,) * (count - len(results))


def step_at(steps: Sequence[Step], lines: Mapping[int, int], error: BaseException) -> Step:
    """The step at whose line of a compiled function ``error`` came through: errors cost the
    function nothing until they happen."""
    traceback = error.__traceback__
    assert traceback is not None  # an error being handled has one
    return steps[lines[traceback.tb_lineno]]


def one(result: Any) -> Any:
    """A kernel's result for a node of one output."""
    if isinstance(result, _SEQUENCES):
        return result[0] if result else None
    return result


class _Writer:
    """The source of one plan's function, and the objects it names (``bound``)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.bound: dict[str, Any] = {
            "STEPS": plan.steps,
            "DeviceError": DeviceError,
            "Scope": Scope,
            "call_kernel": call_kernel,
            "move": move,
            "one": one,
            "spread": spread,
            "raise_device_error": raise_device_error,
            "raise_kernel_error": raise_kernel_error,
            "step_at": step_at,
        }
        #: The step each line of the function's body runs for, by line number.
        self.step_lines: dict[int, int] = {}
        self.bound["LINES"] = self.step_lines
        self._names: dict[int, str] = {}  # id(object) -> its name in ``bound``
        #: Each value held in a local: (local, the backend it lies on).
        self.locals: dict[str, tuple[str, Backend]] = {}
        self._free: list[str] = []  # locals of released values
        self._made = 0  # locals named so far
        #: The values some step or enclosed subgraph reads, or the graph gives.
        self._used = {value.name for value in plan.graph.outputs}
        for step in plan.steps:
            self._used.update(step.node.inputs)
            self._used.update(name for body in step.node.subgraphs() for name in body.free_names())
        self.lines: list[str] = []

    def source(self) -> str:
        self._feeds()
        if self.plan.steps:
            self.lines.append("try:")
            for index, step in enumerate(self.plan.steps):
                first = len(self.lines)
                self._step(step)
                # the source's line numbers: the def line is the first
                self.step_lines.update(dict.fromkeys(range(first + 2, len(self.lines) + 2), index))
            self.lines += [
                "except DeviceError as error:",
                "    raise_device_error(step_at(STEPS, LINES, error), error)",
                "except Exception as error:",
                "    raise_kernel_error(step_at(STEPS, LINES, error), error)",
            ]
        outputs = "".join(self._output(value.name) + ", " for value in self.plan.graph.outputs)
        self.lines.append(f"return ({outputs})")
        return "def run(plan, feeds, parent):\n" + "".join(f"    {line}\n" for line in self.lines)

    def _bind(self, thing: Any, prefix: str) -> str:
        """The name under which the function reads ``thing``."""
        name = self._names.get(id(thing))
        if name is None:
            name = self._names[id(thing)] = f"{prefix}{len(self.bound)}"
            self.bound[name] = thing
        return name

    def _local(self, value: str, backend: Backend) -> str:
        """A local for ``value``: one a released value left, else a new one (Python compiles a
        function of fewer locals faster)."""
        if not self._free:
            self._free.append(f"v{self._made}")
            self._made += 1
        local = self._free.pop()
        self.locals[value] = (local, backend)
        return local

    def _feeds(self) -> None:
        """Each graph input into a local, on its home; the function declines feeds elsewhere."""
        plan = self.plan
        for value in plan.graph.inputs:
            home = plan.feed_homes[value.name]
            local, where = self._local(value.name, home), self._bind(home, "b")
            self.lines.append(f"placed = feeds.get({value.name!r})")
            if value.name in plan.graph.initializers:  # the default, where not fed
                default = plan.constants.get((value.name, home.name))
                if default is None:
                    default = home.from_numpy(read_only(plan.graph.initializers[value.name]))
                self.lines.append(f"if placed is None: placed = ({self._bind(default, 'c')}, {where})")
            self.lines += [
                f"if placed is None or placed[1] is not {where}: return None",
                f"{local} = placed[0]",
            ]

    def _step(self, step: Step) -> None:
        node, backend = step.node, step.backend
        args = [self._argument(name, constant, backend) for name, constant in step.reads]
        targets = [self._target(name, backend) for name in node.outputs]
        if step.results is not None:  # computed when planned
            for target, result in zip(targets, step.results, strict=False):
                self.lines.append(f"    {target} = {self._bind(result, 'c')}")
        elif step.bodies:
            self._with_bodies(step, args, targets)
        else:
            self._call(step, args, targets)
        for name in step.release:
            held = self.locals.pop(name, None)
            if held is not None:
                self.lines.append(f"    del {held[0]}")
                self._free.append(held[0])

    def _call(self, step: Step, args: list[str], targets: list[str]) -> None:
        direct = direct_call(step, self.plan.types)
        if direct is not None:
            fn = self._bind(direct.fn, "k")
            extra = [self._bind(item, "c") for item in direct.extra]
            self.lines.append(f"    {targets[0]} = {fn}({', '.join(args + extra)})")
            return
        assert step.context is not None  # a step without bodies has its context made
        call = f"{self._bind(step.kernel.fn, 'k')}({', '.join([self._bind(step.context, 'x'), *args])})"
        if len(targets) == 1:
            self.lines.append(f"    {targets[0]} = one({call})")
        else:
            self.lines.append(f"    {', '.join(targets)}, = spread({call}, {len(targets)})")

    def _with_bodies(self, step: Step, args: list[str], targets: list[str]) -> None:
        """A node with subgraphs: they read the running graph's values through a scope of those."""
        free = {name for body in step.node.subgraphs() for name in body.free_names()}
        held = [
            f"{name!r}: ({self.locals[name][0]}, {self._bind(self.locals[name][1], 'b')})"
            for name in sorted(free)
            if name in self.locals
        ]
        scope = f"Scope(plan, {{{', '.join(held)}}}, parent)"
        call = f"call_kernel({self._bind(step, 's')}, ({''.join(arg + ', ' for arg in args)}), {scope})"
        self.lines.append(f"    {', '.join(targets)}, = spread({call}, {len(targets)})")

    def _argument(self, name: str, constant: Any, backend: Backend) -> str:
        """The expression of one input of a step on ``backend``."""
        if constant is not None:
            return self._bind(constant, "c")
        if not name:
            return "None"
        held = self.locals.get(name)
        if held is None:  # a value of an enclosing graph
            return f"move(*parent.lookup({name!r}, {self._bind(backend, 'b')}), {self._bind(backend, 'b')})"
        local, source = held
        if source is backend:
            return local
        return f"move({local}, {self._bind(source, 'b')}, {self._bind(backend, 'b')})"

    def _target(self, name: str, backend: Backend) -> str:
        """The local an output made on ``backend`` goes to (``_`` for one nothing reads)."""
        return self._local(name, backend) if name and name in self._used else "_"

    def _output(self, name: str) -> str:
        """The expression of one graph output as a placed value."""
        held = self.locals.get(name)
        if held is not None:
            return f"({held[0]}, {self._bind(held[1], 'b')})"
        plan = self.plan
        if name in plan.graph.initializers:
            host = plan.host
            buffer = plan.constants.get((name, host.name))
            if buffer is None:
                buffer = host.from_numpy(read_only(plan.graph.initializers[name]))
            return f"({self._bind(buffer, 'c')}, {self._bind(host, 'b')})"
        return f"parent.lookup({name!r})"
