"""The session API, shaped like ``onnxruntime.InferenceSession`` so existing code ports easily."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from . import dtypes
from .backend import Backend
from .errors import BackendUnavailableError, DeviceError, InvalidArgumentError, InvalidFeedError
from .formats import ModelSource, PathOrBytes, load, save_onnx
from .ir import OPTIONAL, SEQUENCE, TENSOR, Graph, Shape, State, Value
from .limits import DEFAULT_LIMITS, Limits, limits_for_runs
from .passes import GraphOptimizationLevel, optimize
from .passes.shape_inference import InferenceMemo
from .planner import Placed, Plan, Transfer, build_plan
from .profiler import MODEL_LOADING, MODEL_RUN, SESSION, SESSION_INITIALIZATION, Profiler
from .tensor import EMPTY_OPTIONAL, Tensor, TensorSequence
from .threads import checked_thread_count, intra_op

#: What a session returns for one output: a tensor, a sequence's tensors, or None for an
#: empty optional (on the host: arrays in place of tensors).
Output = Tensor | list[Tensor] | None
HostOutput = np.ndarray | list[np.ndarray] | None

#: onnxruntime provider names accepted as aliases, so ported code keeps working.
PROVIDER_ALIASES = {
    "CPUExecutionProvider": "cpu",
    "CUDAExecutionProvider": "cuda",
    "WebGpuExecutionProvider": "webgpu",
}


@dataclass(frozen=True)
class NodeArg:
    """An input or output of a session, as ``onnxruntime.NodeArg`` describes it."""

    name: str
    type: str
    shape: list[int | str | None]


@dataclass
class SessionOptions:
    """Options of a session, with onnxruntime's names.

    ``limits`` bounds what the model file may ask for. ``graph_optimization_level`` is a
    :class:`GraphOptimizationLevel` (or ``"disable"``, ``"basic"``, ``"extended"``, ``"all"``);
    the default is ``ORT_ENABLE_ALL``, as in onnxruntime. ``optimized_model_filepath``, when
    set, is where the optimized graph is saved as an ONNX file. ``enable_profiling`` times session
    creation, every run and every node of it until :meth:`InferenceSession.end_profiling` writes
    them to ``{profile_file_prefix}_{time}.json`` (a Chrome trace). ``intra_op_num_threads`` is
    how many threads the session's kernels may use (0: the backend's default); it holds for this
    session only and changes nothing process-wide. ``inter_op_num_threads`` is accepted for
    onnxruntime's sake: nodes run one after another, so it has no effect.
    """

    limits: Limits | None = None
    graph_optimization_level: GraphOptimizationLevel | int | str = GraphOptimizationLevel.ORT_ENABLE_ALL
    optimized_model_filepath: str | Path = ""
    enable_profiling: bool = False
    profile_file_prefix: str = "spawnml_profile"
    intra_op_num_threads: int = 0
    inter_op_num_threads: int = 0


class InferenceSession:
    """Load a model, plan it on the given providers, and run it.

    ``providers`` is a priority list of backend names (``["webgpu", "cpu"]``); each node
    runs on the first provider that supports it. The default is ``["cpu"]``.
    :meth:`close` (or leaving a ``with`` block) frees the session's device memory.

    A stateful model (one whose graph declares :class:`~spawnml.ir.State`, such as a streaming
    TFLite model with resource variables) keeps its state in the session: the state's inputs
    and outputs are hidden from :meth:`get_inputs` and :meth:`get_outputs`, each run reads the
    state the previous successful run left (a failed run leaves it as it was), and
    :meth:`reset_state` starts a new stream. Runs of a stateful session are serialised, one
    at a time, since each depends on the one before; stateless sessions run concurrently.
    """

    def __init__(
        self,
        path_or_bytes: PathOrBytes | ModelSource | Graph,
        sess_options: SessionOptions | None = None,
        providers: Sequence[str] | None = None,
        *,
        limits: Limits | None = None,
    ) -> None:
        from .discovery import operators

        options = sess_options or SessionOptions()
        self._profile_prefix = options.profile_file_prefix
        self._profiler = Profiler(self._profile_prefix) if options.enable_profiling else None
        created = Profiler.now()
        limits = limits or options.limits
        self._limits = limits or DEFAULT_LIMITS
        self._threads = checked_thread_count(options.intra_op_num_threads)
        checked_thread_count(options.inter_op_num_threads, "inter_op_num_threads")
        loaded = path_or_bytes if isinstance(path_or_bytes, Graph) else load(path_or_bytes, limits)
        if self._profiler is not None:
            self._profiler.record(MODEL_LOADING, SESSION, created)
        initialized = Profiler.now()
        self._providers = resolve_providers(providers)
        memo = InferenceMemo()  # the planner infers again what the optimizer last inferred
        self._graph = optimize(loaded, options.graph_optimization_level, self._providers, operators(), memo)
        if options.optimized_model_filepath:
            save_onnx(self._graph, Path(options.optimized_model_filepath))
        self._plan: Plan | None = build_plan(self._graph, self._providers, operators(), memo)
        self._feedable = {value.name: value for value in self._graph.inputs}
        self._states = _checked_states(self._graph)
        self._state_outputs = {state.output for state in self._graph.states}
        #: What each state input reads on the next run: a host array or a device tensor.
        self._state: dict[str, np.ndarray | Tensor] = {}
        self._state_lock: AbstractContextManager[Any] = threading.Lock() if self._states else nullcontext()
        self.reset_state()
        self._required = [arg.name for arg in self.get_inputs()]  # checked on every run
        #: The last feeds that passed every check, as :func:`_host_signature` gives them: feeds
        #: with the same names, types and shapes pass again without the checks.
        self._accepted: tuple[tuple[str, np.dtype, tuple[int, ...]], ...] | None = None
        if self._profiler is not None:
            self._profiler.record(SESSION_INITIALIZATION, SESSION, initialized)
            self._attach(self._profiler)

    def close(self) -> None:
        """Free the device memory of the model's weights; the session cannot run afterwards.

        Not to be called while another thread is running the session.
        """
        if self._plan is None:
            return
        backends = {backend.name: backend for backend in self._providers}
        for plan in _plans(self._plan):
            for (_, provider), buffer in plan.constants.items():
                backends[provider].discard(buffer)
        self._plan = None

    def __enter__(self) -> InferenceSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- onnxruntime's API -------------------------------------------------------------
    def get_inputs(self) -> list[NodeArg]:
        """The inputs a caller feeds (inputs with an initializer default are optional; the
        session feeds its state itself)."""
        hidden = self._graph.initializers.keys() | self._states.keys()
        return [_node_arg(value) for value in self._graph.inputs if value.name not in hidden]

    def get_outputs(self) -> list[NodeArg]:
        """The outputs a run returns (the next state stays in the session)."""
        return [_node_arg(value) for value in self._graph.outputs if value.name not in self._state_outputs]

    def reset_state(self) -> None:
        """Start a new stream: the next run reads the state's initial values.

        SpawnML's addition to onnxruntime's API; a session without state has nothing to reset.
        Waits for a run in progress to finish.
        """
        with self._state_lock:
            self._state = {name: state.initial for name, state in self._states.items()}

    def get_providers(self) -> list[str]:
        return [backend.name for backend in self._providers]

    def run(
        self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any], run_options: Any = None
    ) -> list[HostOutput]:
        """Run the model on host arrays and return host arrays, like onnxruntime.

        A sequence is fed and returned as a list of arrays, an empty optional as None.
        """
        profiler = self._profiler
        start = 0 if profiler is None else profiler.now()
        results = [_to_host(output) for output in self._run(output_names, input_feed)]
        if profiler is not None:
            profiler.record(MODEL_RUN, SESSION, start)
        return results

    # -- profiling, as onnxruntime has it ------------------------------------------------------
    def end_profiling(self) -> str:
        """Stop profiling and write its events as a Chrome trace; the file's path.

        ``""`` when the session is not profiling, as in onnxruntime. The trace opens in
        Perfetto (ui.perfetto.dev) or ``chrome://tracing``.
        """
        profiler = self._profiler
        if profiler is None:
            return ""
        self._attach(None)
        return profiler.write()

    def get_profiling_start_time_ns(self) -> int:
        """When profiling started, in nanoseconds since the epoch (0 when not profiling)."""
        return 0 if self._profiler is None else self._profiler.start_time_ns

    def start_profiling(self, file_prefix: str | None = None) -> None:
        """Start profiling now (SpawnML's addition to onnxruntime's API): runs after warm-up only.

        ``file_prefix`` replaces the options' ``profile_file_prefix`` for this period.
        """
        if self._profiler is not None:
            raise InvalidArgumentError("the session is already profiling; call end_profiling() first")
        self._attach(Profiler(file_prefix or self._profile_prefix))

    # -- device-resident execution --------------------------------------------------------
    def run_with_tensors(
        self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any]
    ) -> list[Output]:
        """Run with :class:`Tensor` (or array) feeds; outputs stay on their device."""
        from . import autograd  # noqa: F401  (defines the math methods of the Tensors handed out)

        profiler = self._profiler
        start = 0 if profiler is None else profiler.now()
        results = self._run(output_names, input_feed)
        if profiler is not None:
            profiler.record(MODEL_RUN, SESSION, start)
        return results

    def _run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any]) -> list[Output]:
        plan = self._open_plan()
        names = self._output_names(output_names)
        fed = [name for name in input_feed if name in self._states]
        if fed:
            raise InvalidFeedError(
                f"input(s) {fed} hold the model's state, which the session feeds itself; "
                "call reset_state() to start a new stream"
            )
        with self._state_lock:
            placed = self._check_feeds({**input_feed, **self._state})
            next_state = [state.output for state in self._states.values()]
            # bounds the work of this run (Loop iterations), and its threads
            with limits_for_runs(self._limits), intra_op(self._threads):
                results = [
                    _output(buffer, backend) for buffer, backend in plan.run(placed, names + next_state)
                ]
            if next_state:
                self._state = dict(zip(self._states, _state_tensors(results[len(names) :]), strict=True))
        return results[: len(names)]

    # -- introspection ----------------------------------------------------------------------
    @property
    def graph(self) -> Graph:
        return self._graph

    def placement(self) -> list[tuple[str, str, str]]:
        """Which provider runs each node: ``(node, op_type, provider)`` in execution order."""
        return self._open_plan().placement()

    def transfers(self) -> list[Transfer]:
        """Values copied between providers on every run."""
        return list(self._open_plan().transfers)

    # -- helpers ------------------------------------------------------------------------------
    def _attach(self, profiler: Profiler | None) -> None:
        """Profile every run (and the runs of every subgraph) into ``profiler``, or stop (None)."""
        self._profiler = profiler
        if self._plan is not None:
            for plan in _plans(self._plan):
                plan.profiler = profiler

    def _open_plan(self) -> Plan:
        if self._plan is None:
            raise InvalidArgumentError("the session is closed; create a new InferenceSession")
        return self._plan

    def _output_names(self, output_names: Sequence[str] | None) -> list[str]:
        declared = [arg.name for arg in self.get_outputs()]
        if not output_names:
            return declared
        unknown = [name for name in output_names if name not in declared]
        if unknown:
            raise InvalidArgumentError(
                f"unknown output name(s) {unknown}; the model's outputs are {declared}"
            )
        return list(output_names)

    def _check_feeds(self, feeds: Mapping[str, Any]) -> dict[str, tuple[Any, Backend]]:
        homes = self._open_plan().feed_homes
        signature = _host_signature(feeds)
        if signature is not None and signature == self._accepted:
            return {name: _placed_tensor(name, feed, homes[name]) for name, feed in feeds.items()}
        placed = self._checked_feeds(feeds, homes)
        self._accepted = signature
        return placed

    def _checked_feeds(self, feeds: Mapping[str, Any], homes: Mapping[str, Backend]) -> dict[str, Placed]:
        unknown = sorted(set(feeds) - set(self._feedable))
        if unknown:
            raise InvalidFeedError(
                f"unknown input name(s) {unknown}; the model's inputs are {sorted(self._feedable)}"
            )
        absent = [name for name in self._required if name not in feeds]
        if absent:
            raise InvalidFeedError(f"missing input(s) {absent}; the model requires {self._required}")
        symbols: dict[str, tuple[int, str]] = {}
        return {
            name: self._placed(self._feedable[name], feed, symbols, homes.get(name, self._providers[0]))
            for name, feed in feeds.items()
        }

    def _placed(
        self, expected: Value, feed: Any, symbols: dict[str, tuple[int, str]], home: Backend
    ) -> Placed:
        """One feed on its backend (``home`` for host data), checked against the value the model declares."""
        if expected.kind == OPTIONAL and feed is None:
            return EMPTY_OPTIONAL, home
        if expected.kind == OPTIONAL:
            return self._placed(_content(expected), feed, symbols, home)
        if expected.kind == SEQUENCE:
            return self._placed_sequence(expected, feed, home)
        buffer, backend = _placed_tensor(expected.name, feed, home)
        _check_feed(expected, backend.dtype_of(buffer), backend.shape_of(buffer), symbols)
        return buffer, backend

    def _placed_sequence(self, expected: Value, feed: Any, home: Backend) -> Placed:
        """A list of tensors as a sequence; each is checked like a tensor input of its own."""
        name = expected.name
        if not isinstance(feed, list | tuple):
            raise InvalidFeedError(
                f"input {name!r} is a sequence: feed a list of arrays, not {type(feed).__name__}"
            )
        element = _content(expected)
        items = [_placed_tensor(f"{name}[{i}]", item, home) for i, item in enumerate(feed)]
        backends = {backend.name for _, backend in items}
        if len(backends) > 1:
            raise InvalidFeedError(f"input {name!r}: the tensors of a sequence lie on {sorted(backends)}")
        backend = items[0][1] if items else home
        dtype = element.dtype if element.dtype is not None or not items else backend.dtype_of(items[0][0])
        for i, (buffer, _) in enumerate(items):
            item = replace(element, name=f"{name}[{i}]", dtype=dtype)
            _check_feed(item, backend.dtype_of(buffer), backend.shape_of(buffer), {})
        return TensorSequence(tuple(buffer for buffer, _ in items), dtype), backend


def _host_signature(feeds: Mapping[str, Any]) -> tuple[tuple[str, np.dtype, tuple[int, ...]], ...] | None:
    """Each feed's name, element type and shape, in order, where every feed is a numpy array
    (None otherwise): what decides whether the checks of :meth:`InferenceSession._checked_feeds`
    pass, and how each feed is placed."""
    signature = []
    for name, feed in feeds.items():
        if type(feed) is not np.ndarray:
            return None
        signature.append((name, feed.dtype, feed.shape))
    return tuple(signature)


def _placed_tensor(name: str, feed: Any, home: Backend) -> Placed:
    """A tensor feed where it lies, host data uploaded to ``home``."""
    if isinstance(feed, Tensor):
        return feed.buffer, feed.backend
    try:
        return home.from_numpy(_as_array(name, feed)), home
    except DeviceError as error:
        raise error.at(f"input {name!r} on {home.name!r}") from error.__cause__


def resolve_providers(providers: Sequence[str] | None) -> list[Backend]:
    """Backends for provider names, refusing unknown and unavailable ones with the reason."""
    from .discovery import backends, not_loaded

    installed = backends()
    if not installed:
        raise BackendUnavailableError(
            "no SpawnML backend is installed; install one, e.g. `pip install spawnml-cpu`"
        )
    names = [PROVIDER_ALIASES.get(name, name) for name in (providers or ["cpu"])]
    if not names:
        raise InvalidArgumentError("providers must name at least one backend")
    chosen = []
    for name in names:
        if name not in installed:
            raise BackendUnavailableError(
                f"provider {name!r} {not_loaded('backend', name)} (loaded backends: {sorted(installed)})"
            )
        status = installed[name].availability()
        if not status.available:
            raise BackendUnavailableError(f"provider {name!r} is installed but unavailable: {status.reason}")
        chosen.append(installed[name])
    return chosen


def _plans(plan: Plan) -> list[Plan]:
    """``plan`` and the plans of its subgraphs, at every depth."""
    return [plan, *(inner for step in plan.steps for body in step.bodies.values() for inner in _plans(body))]


def _node_arg(value: Value) -> NodeArg:
    shape = [] if value.shape is None else list(value.shape)
    return NodeArg(value.name, _type_string(value), shape)


def _type_string(value: Value) -> str:
    """onnxruntime's name of a value's type, e.g. ``seq(tensor(float))``."""
    if value.kind == TENSOR:
        return dtypes.type_string(value.dtype)
    container = "seq" if value.kind == SEQUENCE else value.kind
    return f"{container}({_type_string(_content(value))})"


def _content(value: Value) -> Value:
    """What a sequence or optional holds, under the container's name (unknown if undeclared)."""
    return Value(value.name) if value.element is None else replace(value.element, name=value.name)


def _checked_states(graph: Graph) -> dict[str, State]:
    """The graph's state by input name, refused unless each reads an input and writes an output."""
    inputs, outputs = {value.name for value in graph.inputs}, {value.name for value in graph.outputs}
    for state in graph.states:
        if state.input not in inputs or state.output not in outputs:
            raise InvalidArgumentError(
                f"state {state.name!r} of graph {graph.name!r} reads {state.input!r} and writes "
                f"{state.output!r}, which must be a graph input and a graph output"
            )
    return {state.input: state for state in graph.states}


def _state_tensors(outputs: list[Output]) -> list[Tensor]:
    """The next state, as a run returned it (state is made of tensors)."""
    tensors = [output for output in outputs if isinstance(output, Tensor)]
    if len(tensors) != len(outputs):
        raise InvalidArgumentError("a state output of the model is not a tensor")
    return tensors


def _output(buffer: Any, backend: Backend) -> Output:
    if buffer is EMPTY_OPTIONAL:
        return None
    if isinstance(buffer, TensorSequence):
        return [Tensor(item, backend) for item in buffer.items]
    return Tensor(buffer, backend)


def _to_host(output: Output) -> HostOutput:
    if isinstance(output, list):
        return [tensor.numpy() for tensor in output]
    return None if output is None else output.numpy()


def _as_array(name: str, feed: Any) -> np.ndarray:
    try:
        return np.asarray(feed)
    except Exception as error:
        raise InvalidFeedError(
            f"input {name!r}: cannot convert {type(feed).__name__} to an array: {error}"
        ) from error


def _check_feed(
    expected: Value, dtype: np.dtype, shape: tuple[int, ...], symbols: dict[str, tuple[int, str]]
) -> None:
    """Raise :class:`InvalidFeedError` when a feed's dtype or shape contradicts the model."""
    name = expected.name
    if expected.dtype is not None and dtype != expected.dtype:
        raise InvalidFeedError(
            f"input {name!r} expects {dtypes.type_string(expected.dtype)} but got {dtypes.type_string(dtype)}"
        )
    declared: Shape = expected.shape
    if declared is None:
        return
    if len(shape) != len(declared):
        raise InvalidFeedError(
            f"input {name!r} expects rank {len(declared)} {_show(declared)} "
            f"but got rank {len(shape)} {list(shape)}"
        )
    for axis, (want, got) in enumerate(zip(declared, shape, strict=True)):
        if isinstance(want, int) and want != got:
            raise InvalidFeedError(
                f"input {name!r} expects shape {_show(declared)} but got {list(shape)} "
                f"(axis {axis}: {got} != {want})"
            )
        if isinstance(want, str):
            seen = symbols.setdefault(want, (got, name))
            if seen[0] != got:
                raise InvalidFeedError(
                    f"input {name!r} axis {axis} is dimension {want!r} = {got}, but input {seen[1]!r} "
                    f"gave {want!r} = {seen[0]}"
                )


def _show(shape: Shape) -> str:
    return "[" + ", ".join("?" if dim is None else str(dim) for dim in shape or ()) + "]"
