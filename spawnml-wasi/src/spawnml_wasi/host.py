"""The wasi-nn calls, answered by SpawnML sessions, for one guest.

Each call takes the guest's memory and its raw ``i32`` arguments and returns an ``nn_errno``.
Nothing a guest passes can raise out of a call: pointers and lengths are checked before use,
handles are looked up, bounds are enforced before work starts, and a failure inside SpawnML is
answered with the matching error code (the reason is logged, and kept in :attr:`last_error`).
A call that fails changes nothing: results are written to the guest only once the work is done.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from spawnml.errors import (
    BackendUnavailableError,
    InvalidFeedError,
    ModelLimitError,
    ModelLoadError,
    SpawnMLError,
    UnknownFormatError,
    UnsupportedOperatorError,
)
from spawnml.formats import ModelSource, detect, load
from spawnml.limits import Limits
from spawnml.plugins import backends, formats
from spawnml.session import InferenceSession, NodeArg

from .abi import (
    TENSOR_BYTES,
    TENSOR_DATA_OFFSET,
    TENSOR_DIMENSIONS_OFFSET,
    TENSOR_TYPE_OFFSET,
    Errno,
    ExecutionTarget,
    GraphEncoding,
    NnError,
    TensorType,
)
from .bounds import GuestBounds
from .memory import (
    GuestMemory,
    check_range,
    list_at,
    read_bytes,
    read_list,
    unsigned,
    write_u32,
)

log = logging.getLogger(__name__)

#: The format loader each encoding names; encodings absent here are not SpawnML's to run.
ENCODING_FORMATS = {
    GraphEncoding.ONNX: "onnx",
    GraphEncoding.TENSORFLOW: "tensorflow",
    GraphEncoding.TENSORFLOWLITE: "tflite",
}
#: The SpawnML failures a guest may cause, and the error code each answers.
_ERRNOS: tuple[tuple[type[SpawnMLError], Errno], ...] = (
    (ModelLimitError, Errno.TOO_LARGE),
    (UnknownFormatError, Errno.INVALID_ENCODING),
    (ModelLoadError, Errno.INVALID_ARGUMENT),
    (UnsupportedOperatorError, Errno.UNSUPPORTED_OPERATION),
    (BackendUnavailableError, Errno.UNSUPPORTED_OPERATION),
    (InvalidFeedError, Errno.INVALID_ARGUMENT),
)


@dataclass
class _Graph:
    """A loaded model: one session, shared by the contexts made from it."""

    session: InferenceSession
    inputs: list[NodeArg]
    outputs: list[str]


@dataclass
class _Context:
    """One execution context: the inputs set so far, the outputs of the last ``compute``."""

    graph: _Graph
    feeds: dict[int, np.ndarray] = field(default_factory=dict)
    results: list[np.ndarray] | None = None


class WasiNnHost:
    """The state of one guest's wasi-nn calls.

    ``providers`` are the backends the guest's graphs may use, in order of preference: the
    ``cpu`` target runs on ``cpu`` when it is among them, the ``gpu`` target on the others (never
    on the CPU in its place). ``named_models`` maps names to model files (or bytes) loaded now,
    for ``load_by_name``.
    """

    def __init__(
        self,
        *,
        providers: Sequence[str] = ("cpu",),
        named_models: Mapping[str, str | Path | bytes] | None = None,
        bounds: GuestBounds | None = None,
    ) -> None:
        self.bounds = bounds or GuestBounds()
        self.providers = list(providers)
        self._limits = Limits(max_file_bytes=self.bounds.max_model_bytes)
        self._graphs: dict[int, _Graph] = {}
        self._contexts: dict[int, _Context] = {}
        self._handles = itertools.count(1)
        #: The last call's failure (None after a success), for the host's diagnostics.
        self.last_error: NnError | None = None
        cpu_session = self._target_providers(ExecutionTarget.CPU)
        self._named = {
            name: _new_graph(InferenceSession(source, providers=cpu_session, limits=self._limits))
            for name, source in (named_models or {}).items()
        }

    # -- the calls, by their witx names ---------------------------------------------------------
    def load(
        self, memory: GuestMemory, builders: int, count: int, encoding: int, target: int, result: int
    ) -> int:
        """``load(builder: graph_builder_array, encoding, target) -> graph``."""
        return self._answer(lambda: self._load(memory, builders, count, encoding, target, result))

    def load_by_name(self, memory: GuestMemory, name: int, length: int, result: int) -> int:
        """``load_by_name(name: string) -> graph``: a model the host preloaded."""
        return self._answer(lambda: self._load_by_name(memory, name, length, result))

    def init_execution_context(self, memory: GuestMemory, graph: int, result: int) -> int:
        """``init_execution_context(graph) -> graph_execution_context``."""
        return self._answer(lambda: self._init_execution_context(memory, graph, result))

    def set_input(self, memory: GuestMemory, context: int, index: int, tensor: int) -> int:
        """``set_input(context, index, tensor)``."""
        return self._answer(lambda: self._set_input(memory, context, index, tensor))

    def compute(self, memory: GuestMemory, context: int) -> int:
        """``compute(context)``: run the graph on the inputs set."""
        return self._answer(lambda: self._compute(context))

    def get_output(
        self, memory: GuestMemory, context: int, index: int, buffer: int, capacity: int, result: int
    ) -> int:
        """``get_output(context, index, out_buffer, out_buffer_max_size) -> buffer_size``."""
        return self._answer(lambda: self._get_output(memory, context, index, buffer, capacity, result))

    #: The calls the guest imports, by name, with their ``i32`` parameter counts (memory aside).
    CALLS: Mapping[str, int] = {
        "load": 5,
        "load_by_name": 3,
        "init_execution_context": 2,
        "set_input": 3,
        "compute": 1,
        "get_output": 5,
    }

    # -- the work behind them ---------------------------------------------------------------------
    def _answer(self, call: Callable[[], None]) -> int:
        """Run ``call`` and answer its error code; nothing it raises leaves the host."""
        try:
            call()
        except NnError as error:
            self.last_error = error
        except SpawnMLError as error:
            errno = next((code for kind, code in _ERRNOS if isinstance(error, kind)), Errno.RUNTIME_ERROR)
            self.last_error = NnError(errno, str(error))
        except MemoryError:
            self.last_error = NnError(Errno.TOO_LARGE, "the host ran out of memory for this call")
        except Exception as error:  # a bug of ours: the guest gets an error code, the host a log
            log.exception("wasi-nn call failed inside the host")
            self.last_error = NnError(Errno.RUNTIME_ERROR, f"{type(error).__name__}: {error}")
        else:
            self.last_error = None
            return Errno.SUCCESS
        log.info("wasi-nn: %s", self.last_error)
        return self.last_error.errno

    def _load(
        self, memory: GuestMemory, builders: int, count: int, encoding: int, target: int, result: int
    ) -> None:
        builders, count, result = unsigned(builders), unsigned(count), unsigned(result)
        check_range(memory, result, 4, "load's result")
        chosen = _enum(GraphEncoding, encoding, "graph encoding")
        providers = self._target_providers(_enum(ExecutionTarget, target, "execution target"))
        if chosen not in ENCODING_FORMATS and chosen is not GraphEncoding.AUTODETECT:
            raise NnError(Errno.INVALID_ENCODING, f"SpawnML does not load the {chosen.name.lower()} encoding")
        if count != 1:
            raise NnError(
                Errno.INVALID_ARGUMENT,
                f"the {chosen.name.lower()} encoding takes one builder (the model file's bytes), got {count}",
            )
        self._check_room(self._graphs, self.bounds.max_graphs, "graphs")
        pointer, length = read_list(memory, builders, "the graph builder")
        if length > self.bounds.max_model_bytes:
            raise NnError(Errno.TOO_LARGE, f"the model's {length} bytes exceed {self.bounds.max_model_bytes}")
        source = ModelSource.of(read_bytes(memory, pointer, length, "the model's bytes"))
        if chosen is not GraphEncoding.AUTODETECT:
            found = detect(source, list(formats().values())).name
            if found != ENCODING_FORMATS[chosen]:
                raise NnError(
                    Errno.INVALID_ENCODING, f"the bytes are a {found} model, not {chosen.name.lower()}"
                )
        session = InferenceSession(load(source, self._limits), providers=providers, limits=self._limits)
        handle = next(self._handles)
        self._graphs[handle] = _new_graph(session)
        write_u32(memory, result, handle, "load's result")

    def _load_by_name(self, memory: GuestMemory, name: int, length: int, result: int) -> None:
        name, length, result = unsigned(name), unsigned(length), unsigned(result)
        check_range(memory, result, 4, "load_by_name's result")
        if length > self.bounds.max_name_bytes:
            raise NnError(Errno.TOO_LARGE, f"a {length}-byte name exceeds {self.bounds.max_name_bytes}")
        text = read_bytes(memory, name, length, "the model's name").decode("utf-8", errors="replace")
        graph = self._named.get(text)
        if graph is None:
            raise NnError(Errno.NOT_FOUND, f"no model named {text!r} (the host has {sorted(self._named)})")
        self._check_room(self._graphs, self.bounds.max_graphs, "graphs")
        handle = next(self._handles)
        self._graphs[handle] = graph
        write_u32(memory, result, handle, "load_by_name's result")

    def _init_execution_context(self, memory: GuestMemory, graph: int, result: int) -> None:
        result = unsigned(result)
        check_range(memory, result, 4, "init_execution_context's result")
        loaded = _lookup(self._graphs, unsigned(graph), "graph")
        self._check_room(self._contexts, self.bounds.max_contexts, "execution contexts")
        handle = next(self._handles)
        self._contexts[handle] = _Context(loaded)
        write_u32(memory, result, handle, "init_execution_context's result")

    def _set_input(self, memory: GuestMemory, context: int, index: int, tensor: int) -> None:
        state = _lookup(self._contexts, unsigned(context), "execution context")
        index, tensor = unsigned(index), unsigned(tensor)
        inputs = state.graph.inputs
        if index >= len(inputs):
            raise NnError(Errno.INVALID_ARGUMENT, f"input {index} of a graph with {len(inputs)} inputs")
        record = read_bytes(memory, tensor, TENSOR_BYTES, "the tensor record")
        dims_pointer, rank = list_at(record, TENSOR_DIMENSIONS_OFFSET)
        data_pointer, size = list_at(record, TENSOR_DATA_OFFSET)
        element = _enum(TensorType, record[TENSOR_TYPE_OFFSET], "tensor type")
        if rank > self.bounds.max_rank:
            raise NnError(Errno.TOO_LARGE, f"rank {rank} exceeds {self.bounds.max_rank}")
        shape = tuple(
            int(d) for d in np.frombuffer(read_bytes(memory, dims_pointer, 4 * rank, "the dimensions"), "<u4")
        )
        elements = math.prod(shape)
        if elements > self.bounds.max_elements:
            raise NnError(Errno.TOO_LARGE, f"{elements} elements exceed {self.bounds.max_elements}")
        if size != elements * element.dtype.itemsize:
            raise NnError(
                Errno.INVALID_ARGUMENT,
                f"{size} data bytes for a {element.name.lower()} tensor of shape {list(shape)}, "
                f"which takes {elements * element.dtype.itemsize}",
            )
        declared = inputs[index]
        if declared.type != f"tensor({_onnx_name(element)})":
            raise NnError(
                Errno.INVALID_ARGUMENT,
                f"input {index} ({declared.name!r}) is {declared.type}, not a {element.name.lower()} tensor",
            )
        data = read_bytes(memory, data_pointer, size, "the tensor data")
        state.feeds[index] = np.frombuffer(data, element.dtype).reshape(shape)

    def _compute(self, context: int) -> None:
        state = _lookup(self._contexts, unsigned(context), "execution context")
        inputs = state.graph.inputs
        missing = [arg.name for i, arg in enumerate(inputs) if i not in state.feeds]
        if missing:
            raise NnError(Errno.INVALID_ARGUMENT, f"compute before set_input of {missing}")
        feeds = {inputs[i].name: array for i, array in state.feeds.items()}
        state.results = None
        outputs = state.graph.session.run(state.graph.outputs, feeds)
        state.results = [np.ascontiguousarray(output) for output in outputs]

    def _get_output(
        self, memory: GuestMemory, context: int, index: int, buffer: int, capacity: int, result: int
    ) -> None:
        state = _lookup(self._contexts, unsigned(context), "execution context")
        index, buffer = unsigned(index), unsigned(buffer)
        capacity, result = unsigned(capacity), unsigned(result)
        check_range(memory, result, 4, "get_output's result")
        if state.results is None:
            raise NnError(Errno.INVALID_ARGUMENT, "get_output before a successful compute")
        if index >= len(state.results):
            count = len(state.results)
            raise NnError(Errno.INVALID_ARGUMENT, f"output {index} of a graph with {count} outputs")
        output = state.results[index]
        if not isinstance(output, np.ndarray) or output.dtype.kind not in "fiub":
            raise NnError(Errno.UNSUPPORTED_OPERATION, f"output {index} is not a numeric tensor")
        data = output.astype(output.dtype.newbyteorder("<"), copy=False).tobytes()
        if len(data) > capacity:
            raise NnError(
                Errno.TOO_LARGE, f"output {index} takes {len(data)} bytes; the buffer holds {capacity}"
            )
        check_range(memory, buffer, len(data), "the output buffer")
        memory.write(buffer, data)
        write_u32(memory, result, len(data), "get_output's result")

    # -- helpers ----------------------------------------------------------------------------------
    def _target_providers(self, target: ExecutionTarget) -> list[str]:
        """The providers a target may run on: the CPU for ``cpu``, the GPUs the host allows for ``gpu``."""
        if target is ExecutionTarget.TPU:
            raise NnError(Errno.UNSUPPORTED_OPERATION, "SpawnML has no TPU backend")
        wanted = [name for name in self.providers if (name == "cpu") == (target is ExecutionTarget.CPU)]
        installed = backends()
        usable = [name for name in wanted if name in installed and installed[name].availability().available]
        if not usable:
            raise NnError(
                Errno.UNSUPPORTED_OPERATION,
                f"no {target.name.lower()} provider is available to this guest "
                f"(the host allows {self.providers})",
            )
        return usable

    def _check_room(self, held: Mapping[int, Any], bound: int, what: str) -> None:
        if len(held) >= bound:
            raise NnError(Errno.TOO_LARGE, f"the guest already holds {len(held)} {what}, the most it may")


def _new_graph(session: InferenceSession) -> _Graph:
    return _Graph(session, session.get_inputs(), [arg.name for arg in session.get_outputs()])


def _enum(kind: Any, value: int, what: str) -> Any:
    try:
        return kind(unsigned(value))
    except ValueError:
        raise NnError(Errno.INVALID_ARGUMENT, f"unknown {what} {unsigned(value)}") from None


def _lookup(held: Mapping[int, Any], handle: int, what: str) -> Any:
    found = held.get(handle)
    if found is None:
        raise NnError(Errno.INVALID_ARGUMENT, f"unknown {what} handle {handle}")
    return found


def _onnx_name(element: TensorType) -> str:
    """The element type as the session's input descriptions name it."""
    return {
        TensorType.F16: "float16",
        TensorType.F32: "float",
        TensorType.F64: "double",
        TensorType.U8: "uint8",
        TensorType.I32: "int32",
        TensorType.I64: "int64",
    }[element]
