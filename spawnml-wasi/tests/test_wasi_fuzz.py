"""Property-based fuzzing of the host: arbitrary call sequences with arbitrary arguments over
arbitrary guest memory. Every call answers a witx error code and raises nothing; a call that
fails leaves the guest's memory and the host's handles as they were. The same sequences also
cross Wasmtime, through a guest module that forwards its exports to the imports."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
import wasmtime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, multiple, rule
from onnx import TensorProto, helper
from spawnml_wasi import Errno, GuestBounds, WasiNnHost
from spawnml_wasi.memory import BytesMemory, WasmtimeMemory
from spawnml_wasi.runner import define_wasi_nn

MEMORY_BYTES = 4096
#: Where the seeded memory holds a valid model, its builder list, a tensor record and a name.
MODEL_AT, BUILDER_AT, TENSOR_AT, DIMS_AT, DATA_AT, NAME_AT = 64, 16, 32, 56, 1024, 1200
CALLS = sorted(WasiNnHost.CALLS)
FORWARDER = '(module\n{imports}\n  (memory (export "memory") 1)\n{exports})'


def tiny_model() -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


MODEL = tiny_model()
assert len(MODEL) < DATA_AT - MODEL_AT


def seeded_memory() -> bytearray:
    """A memory where the interesting offsets hold well-formed arguments, so sequences get deep."""
    memory = bytearray(MEMORY_BYTES)
    memory[MODEL_AT : MODEL_AT + len(MODEL)] = MODEL
    struct.pack_into("<II", memory, BUILDER_AT, MODEL_AT, len(MODEL))
    struct.pack_into("<II", memory, DIMS_AT, 2, 0)
    struct.pack_into("<ff", memory, DATA_AT, -1.0, 2.0)
    struct.pack_into("<IIBxxxII", memory, TENSOR_AT, DIMS_AT, 1, 1, DATA_AT, 8)
    memory[NAME_AT : NAME_AT + 4] = b"relu"
    return memory


RESULT_AT, OUTPUT_AT = 2000, 2100
anything = st.one_of(
    st.sampled_from([-1, -4, 0x7FFF_FFFF, MEMORY_BYTES - 2, MEMORY_BYTES]), st.integers(-(2**31), 2**31 - 1)
)


def either(*likely: int) -> st.SearchStrategy[int]:
    """Mostly one of the values a well-behaved guest would pass here, sometimes anything at all."""
    usual = st.sampled_from(likely)
    return st.integers(0, 7).flatmap(lambda roll: anything if roll == 0 else usual)


handles = either(1, 2, 3, 4, 5)
#: Each call's arguments, mostly well-formed so that sequences get past the first checks.
ARGUMENTS = {
    "load": st.tuples(
        either(BUILDER_AT),
        either(1, 1, 1, 0, 2),
        either(1, 5, 1, 5, 0, 3, 4),
        either(0, 0, 0, 1, 2),
        either(RESULT_AT),
    ),
    "load_by_name": st.tuples(either(NAME_AT), either(4, 4, 4, 3, 0), either(RESULT_AT)),
    "init_execution_context": st.tuples(handles, either(RESULT_AT)),
    "set_input": st.tuples(handles, either(0, 1), either(TENSOR_AT, DIMS_AT)),
    "compute": st.tuples(handles),
    "get_output": st.tuples(handles, either(0, 1), either(OUTPUT_AT), either(8, 4, 4096), either(RESULT_AT)),
}
calls_with_any_handle = st.sampled_from(CALLS).flatmap(lambda name: st.tuples(st.just(name), ARGUMENTS[name]))
calls = st.lists(calls_with_any_handle, max_size=25)
memories = st.integers(0, 3).flatmap(
    lambda roll: st.binary(max_size=MEMORY_BYTES).map(bytearray) if roll == 0 else st.just(None)
)


def host() -> WasiNnHost:
    bounds = GuestBounds(max_model_bytes=MEMORY_BYTES, max_graphs=3, max_contexts=3, max_elements=64)
    return WasiNnHost(named_models={"relu": MODEL}, bounds=bounds)


def held(nn: WasiNnHost) -> tuple[Any, ...]:
    return tuple(nn._graphs), tuple(nn._contexts)


class HostCalls(RuleBasedStateMachine):
    """Calls in any order on a seeded memory that the guest may scribble over between calls;
    handles the host gave are reused, so sequences reach compute and get_output."""

    graphs = Bundle("graphs")
    contexts = Bundle("contexts")

    def __init__(self) -> None:
        super().__init__()
        self.nn = host()
        self.guest = BytesMemory(seeded_memory())

    def call(self, name: str, *args: int) -> int:
        before_memory, before_handles = bytes(self.guest.data), held(self.nn)
        code = getattr(self.nn, name)(self.guest, *args)
        assert code in set(Errno)
        if code != Errno.SUCCESS:
            assert self.nn.last_error is not None and self.nn.last_error.errno == code
            assert bytes(self.guest.data) == before_memory
            assert held(self.nn) == before_handles
        return code

    def handle_or_nothing(self, code: int, result: int) -> Any:
        return struct.unpack_from("<I", self.guest.data, result)[0] if code == Errno.SUCCESS else multiple()

    @rule(target=graphs, args=ARGUMENTS["load"])
    def load(self, args: tuple[int, ...]) -> Any:
        return self.handle_or_nothing(self.call("load", *args), args[-1])

    @rule(target=graphs, args=ARGUMENTS["load_by_name"])
    def load_by_name(self, args: tuple[int, ...]) -> Any:
        return self.handle_or_nothing(self.call("load_by_name", *args), args[-1])

    @rule(target=contexts, graph=graphs, result=either(RESULT_AT))
    def init_execution_context(self, graph: int, result: int) -> Any:
        return self.handle_or_nothing(self.call("init_execution_context", graph, result), result)

    @rule(context=contexts, index=either(0, 1), tensor=either(TENSOR_AT, DIMS_AT))
    def set_input(self, context: int, index: int, tensor: int) -> None:
        self.call("set_input", context, index, tensor)

    @rule(context=contexts)
    def compute(self, context: int) -> None:
        self.call("compute", context)

    @rule(context=contexts, args=ARGUMENTS["get_output"])
    def get_output(self, context: int, args: tuple[int, ...]) -> None:
        self.call("get_output", context, *args[1:])

    @rule(context=contexts)
    def run_through(self, context: int) -> None:
        """The well-behaved path on a context, over whatever the memory holds by now."""
        if self.call("set_input", context, 0, TENSOR_AT) == Errno.SUCCESS:
            self.call("compute", context)
        self.call("get_output", context, 0, OUTPUT_AT, 8, RESULT_AT)

    @rule(call=calls_with_any_handle)
    def any_call(self, call: tuple[str, tuple[int, ...]]) -> None:
        """Any call with any handle: unknown ones, a graph's where a context's is due, stale ones."""
        self.call(call[0], *call[1])

    @rule(offset=st.integers(0, MEMORY_BYTES - 1), data=st.binary(min_size=1, max_size=16))
    def scribble(self, offset: int, data: bytes) -> None:
        """The guest changes its memory between calls (records, dimensions, the model)."""
        self.guest.data[offset : offset + len(data)] = data[: MEMORY_BYTES - offset]


HostCalls.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
test_call_sequences_in_any_order_fail_cleanly = HostCalls.TestCase


def forwarder() -> str:
    """A module importing every wasi-nn call and exporting it under the same name."""
    imports, exports = [], []
    for name, arity in WasiNnHost.CALLS.items():
        params = " ".join(["i32"] * arity)
        gets = " ".join(f"local.get {i}" for i in range(arity))
        signature = f"(param {params}) (result i32)"
        imports.append(f'  (import "wasi_ephemeral_nn" "{name}" (func ${name} {signature}))')
        exports.append(f'  (func (export "{name}") {signature} {gets} call ${name})')
    return FORWARDER.format(imports="\n".join(imports), exports="\n".join(exports))


@pytest.fixture(scope="module")
def engine() -> wasmtime.Engine:
    return wasmtime.Engine()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=calls)
def test_call_sequences_across_wasmtime_answer_error_codes(engine, sequence):
    nn = host()
    store = wasmtime.Store(engine)
    linker = wasmtime.Linker(engine)
    define_wasi_nn(linker, nn)
    exports = linker.instantiate(store, wasmtime.Module(engine, forwarder())).exports(store)
    memory = exports["memory"]
    memory.write(store, bytes(seeded_memory()), 0)
    view = WasmtimeMemory(memory, store)
    for name, args in sequence:
        before = view.read(0, view.size())
        code = exports[name](store, *args)
        assert code in set(Errno)
        if code != Errno.SUCCESS:
            assert view.read(0, view.size()) == before


def test_a_guest_without_memory_gets_missing_memory(engine):
    store = wasmtime.Store(engine)
    linker = wasmtime.Linker(engine)
    define_wasi_nn(linker, host())
    module = '(module (import "wasi_ephemeral_nn" "compute" (func $c (param i32) (result i32)))'
    module += ' (func (export "run") (result i32) i32.const 1 call $c))'
    run = linker.instantiate(store, wasmtime.Module(engine, module)).exports(store)["run"]
    assert run(store) == Errno.MISSING_MEMORY


def test_the_seeded_memory_reaches_a_full_run():
    nn, guest = host(), BytesMemory(seeded_memory())
    out = RESULT_AT
    assert nn.load(guest, BUILDER_AT, 1, 1, 0, out) == Errno.SUCCESS
    assert nn.init_execution_context(guest, struct.unpack_from("<I", guest.data, out)[0], out) == 0
    context = struct.unpack_from("<I", guest.data, out)[0]
    assert nn.set_input(guest, context, 0, TENSOR_AT) == Errno.SUCCESS
    assert nn.compute(guest, context) == Errno.SUCCESS
    assert nn.get_output(guest, context, 0, OUTPUT_AT, 8, out) == Errno.SUCCESS
    np.testing.assert_array_equal(
        np.frombuffer(bytes(guest.data[OUTPUT_AT : OUTPUT_AT + 8]), "<f4"), [0.0, 2.0]
    )
