"""The API behaviours onnxruntime's own Python tests check (onnxruntime/test/python/
onnxruntime_test_python.py) that apply to a CPU session, each asserted on the real onnxruntime and
on spawnml.onnxruntime with the same calls. The models are built here in the manner of the test
data those tests use (mul_1, matmul_2, logicaland, identity_string, the sequence models)."""

from __future__ import annotations

import json
import threading
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
import spawnml  # noqa: E402
import spawnml.onnxruntime as sort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RUNTIMES = [pytest.param(ort, id="onnxruntime"), pytest.param(sort, id="spawnml")]
CPU = ["CPUExecutionProvider"]
X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)


def _serialized(nodes, inputs, outputs, initializers=(), opset: int = 17) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def _info(name: str, elem: int, shape) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def _seq(name: str, elem: int) -> Any:
    return helper.make_value_info(
        name, helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, None))
    )


#: Y = X * W, W an initializer equal to X (onnxruntime's mul_1.onnx).
MUL = _serialized(
    [helper.make_node("Mul", ["X", "W"], ["Y"])],
    [_info("X", TensorProto.FLOAT, [3, 2])],
    [_info("Y", TensorProto.FLOAT, [3, 2])],
    [numpy_helper.from_array(X, "W")],
)
#: Y = X @ [[1], [2]] with X's first dimension unnamed (matmul_2.onnx).
MATMUL = _serialized(
    [helper.make_node("MatMul", ["X", "W"], ["Y"])],
    [_info("X", TensorProto.FLOAT, [None, 2])],
    [_info("Y", TensorProto.FLOAT, [None, 1])],
    [numpy_helper.from_array(np.array([[1.0], [2.0]], np.float32), "W")],
)
#: And of two bool inputs, the second-named first (logicaland.onnx).
LOGICAL_AND = _serialized(
    [helper.make_node("And", ["input1:0", "input:0"], ["output:0"])],
    [_info("input1:0", TensorProto.BOOL, [2, 2]), _info("input:0", TensorProto.BOOL, [2, 2])],
    [_info("output:0", TensorProto.BOOL, [2, 2])],
)
IDENTITY_STRING = _serialized(
    [helper.make_node("Identity", ["input:0"], ["output:0"])],
    [_info("input:0", TensorProto.STRING, [2, 2])],
    [_info("output:0", TensorProto.STRING, [2, 2])],
)
SEQUENCE_LENGTH = _serialized(
    [helper.make_node("SequenceLength", ["X"], ["Y"])],
    [_seq("X", TensorProto.FLOAT)],
    [_info("Y", TensorProto.INT64, [])],
)
SEQUENCE_CONSTRUCT = _serialized(
    [helper.make_node("SequenceConstruct", ["tensor1", "tensor2"], ["output_sequence"])],
    [_info("tensor1", TensorProto.INT64, [2, 3]), _info("tensor2", TensorProto.INT64, [2, 3])],
    [_seq("output_sequence", TensorProto.INT64)],
)
SEQUENCE_INSERT = _serialized(
    [helper.make_node("SequenceInsert", ["input_seq", "tensor"], ["output_sequence"])],
    [_seq("input_seq", TensorProto.INT64), _info("tensor", TensorProto.INT64, [2, 3])],
    [_seq("output_sequence", TensorProto.INT64)],
)
#: Identity of an optional sequence of float tensors (identity_opt.onnx).
IDENTITY_OPTIONAL = _serialized(
    [helper.make_node("Identity", ["x"], ["y"])],
    [
        helper.make_value_info(
            "x",
            helper.make_optional_type_proto(
                helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [5]))
            ),
        )
    ],
    [
        helper.make_value_info(
            "y",
            helper.make_optional_type_proto(
                helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [5]))
            ),
        )
    ],
    opset=18,
)
#: An input that is also an output, beside Add(input, 10).
PASS_THROUGH = _serialized(
    [helper.make_node("Add", ["input_0", "ten"], ["plus_10"])],
    [_info("input_0", TensorProto.FLOAT, [1, 2, 2, 2])],
    [_info("plus_10", TensorProto.FLOAT, [1, 2, 2, 2]), _info("input_0", TensorProto.FLOAT, [1, 2, 2, 2])],
    [numpy_helper.from_array(np.array(10, np.float32), "ten")],
)


def _session(rt: ModuleType, model: bytes | str | Path, options: Any = None) -> Any:
    return rt.InferenceSession(model, sess_options=options, providers=CPU)


def _args(args: list[Any]) -> list[tuple[str, str, Any]]:
    return [(arg.name, arg.type, arg.shape) for arg in args]


# -- module ------------------------------------------------------------------------------------
@pytest.mark.parametrize("rt", RUNTIMES)
def test_version_and_build_info(rt: ModuleType) -> None:
    assert rt.get_version_string() is not None
    assert "Build Info" in rt.get_build_info()
    assert rt.get_all_providers()[-1] == "CPUExecutionProvider"
    assert "CPUExecutionProvider" in rt.get_available_providers()
    rt.disable_telemetry_events()
    rt.enable_telemetry_events()
    assert "CPU" in rt.get_device() or "GPU" in rt.get_device()


@pytest.mark.parametrize("rt", RUNTIMES)
def test_logger_callback_checks_its_arguments(rt: ModuleType) -> None:
    def callback(severity, category, logid, code_location, message) -> None:
        pass

    try:
        rt.set_default_logger_callback(callback, severity=0)
        rt.set_default_logger_callback(lambda *args: None, severity=4)
        for bad in ({"severity": 5}, {"severity": -1}):
            with pytest.raises(RuntimeError):
                rt.set_default_logger_callback(callback, **bad)
        with pytest.raises(RuntimeError):
            rt.set_default_logger_callback("not a callable")
        assert _session(rt, MUL).run(["Y"], {"X": X})[0].shape == (3, 2)
    finally:
        rt.set_default_logger_callback(None)
        rt.set_default_logger_severity(2)


# -- sessions and runs ------------------------------------------------------------------------
@pytest.mark.parametrize("rt", RUNTIMES)
def test_models_load_from_a_path_object_and_from_bytes(rt: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "mul_1.onnx"
    path.write_bytes(MUL)
    for source in (path, str(path), MUL):
        session = _session(rt, source)
        assert _args(session.get_inputs()) == [("X", "tensor(float)", [3, 2])]
        np.testing.assert_array_equal(session.run(["Y"], {"X": X})[0], X * X)


def test_unnamed_dimensions_are_reported_as_onnxruntime_does() -> None:
    real, ours = _session(ort, MATMUL), _session(sort, MATMUL)
    assert _args(ours.get_inputs()) == _args(real.get_inputs())
    assert _args(ours.get_outputs()) == _args(real.get_outputs())
    np.testing.assert_array_equal(ours.run(None, {"X": X})[0], real.run(None, {"X": X})[0])


@pytest.mark.parametrize("rt", RUNTIMES)
def test_non_contiguous_inputs(rt: ModuleType) -> None:
    session = _session(rt, MATMUL)
    x = np.array([[2.0, 1.0], [4.0, 3.0], [6.0, 5.0]], np.float32)[:, [1, 0]]
    strided = np.array([[1.0, 9.0, 2.0], [3.0, 9.0, 4.0], [5.0, 9.0, 6.0]], np.float32)[:, ::2]
    for feed in (x, strided, np.ascontiguousarray(x)):
        np.testing.assert_array_equal(session.run(None, {"X": feed})[0], [[5.0], [11.0], [17.0]])


def test_bool_inputs_keep_the_models_order_and_types() -> None:
    a = np.array([[True, True], [False, False]])
    b = np.array([[True, False], [True, False]])
    real, ours = _session(ort, LOGICAL_AND), _session(sort, LOGICAL_AND)
    assert _args(ours.get_inputs()) == _args(real.get_inputs())
    assert _args(ours.get_outputs()) == _args(real.get_outputs())
    feeds = {"input1:0": a, "input:0": b}
    np.testing.assert_array_equal(ours.run([], feeds)[0], real.run([], feeds)[0])


@pytest.mark.parametrize(
    "x",
    [
        np.array(["this", "is", "identity", "test"]).reshape(2, 2),
        np.array(["Olá", "你好", "여보세요", "hello"]).reshape(2, 2),
        np.array([b"this", b"is", b"identity", b"test"]).reshape(2, 2),
        np.array(["this", "is", "identity", "test"], object).reshape(2, 2),
        np.array([b"must", b"have", b"same", b"size"], np.void).reshape(2, 2),
        [["this", "is"], ["identity", "test"]],
    ],
    ids=["str", "unicode", "bytes", "object", "void", "list"],
)
def test_string_inputs_of_every_numpy_kind(x: Any) -> None:
    real, ours = _session(ort, IDENTITY_STRING), _session(sort, IDENTITY_STRING)
    assert _args(ours.get_inputs()) == _args(real.get_inputs())
    expected, got = real.run([], {"input:0": x})[0], ours.run([], {"input:0": x})[0]
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if isinstance(x, np.ndarray) and x.dtype.kind == "S":
        # onnxruntime reads a full-width bytes element on into the next ("identitytest"), so its
        # own test compares them cut to the input's width; SpawnML decodes each element alone.
        np.testing.assert_array_equal(got.astype(x.dtype), expected.astype(x.dtype))
        np.testing.assert_array_equal(got, np.char.decode(x, "utf-8").astype(object))
    else:
        np.testing.assert_array_equal(got, expected)


def test_sequences_in_and_out() -> None:
    real, ours = _session(ort, SEQUENCE_LENGTH), _session(sort, SEQUENCE_LENGTH)
    assert _args(ours.get_inputs()) == _args(real.get_inputs())
    assert [a.type for a in ours.get_outputs()] == [a.type for a in real.get_outputs()]
    tensors = [np.arange(6, dtype=np.float32).reshape(2, 3)] * 2
    assert ours.run(None, {"X": tensors})[0] == real.run(None, {"X": tensors})[0] == 2
    real, ours = _session(ort, SEQUENCE_CONSTRUCT), _session(sort, SEQUENCE_CONSTRUCT)
    assert (
        [a.type for a in ours.get_outputs()] == [a.type for a in real.get_outputs()] == ["seq(tensor(int64))"]
    )
    feeds: dict[str, Any] = {"tensor1": np.arange(6).reshape(2, 3), "tensor2": np.ones((2, 3), np.int64)}
    np.testing.assert_array_equal(ours.run(None, feeds)[0], real.run(None, feeds)[0])
    real, ours = _session(ort, SEQUENCE_INSERT), _session(sort, SEQUENCE_INSERT)
    assert _args(ours.get_inputs()) == _args(real.get_inputs())
    feeds = {"tensor": np.arange(6).reshape(2, 3), "input_seq": []}
    np.testing.assert_array_equal(ours.run(None, feeds)[0], real.run(None, feeds)[0])


def test_optional_sequence_input() -> None:
    x = [np.arange(5, dtype=np.float32)]
    expected = _session(ort, IDENTITY_OPTIONAL).run(None, {"x": x})[0]
    got = _session(sort, IDENTITY_OPTIONAL).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, expected)


def test_a_missing_input_names_what_is_missing_and_what_was_fed() -> None:
    a = np.array([[True, True], [False, False]])
    messages = []
    for rt in (ort, sort):
        with pytest.raises(ValueError) as raised:
            _session(rt, LOGICAL_AND).run([], {"input:0": a})
        messages.append(str(raised.value))
    assert messages[0] == messages[1]
    assert "Required inputs (['input1:0']) are missing from input feed (['input:0'])" in messages[1]


@pytest.mark.parametrize("rt", RUNTIMES)
def test_one_session_runs_from_two_threads_with_their_own_run_options(rt: ModuleType) -> None:
    options = rt.SessionOptions()
    options.log_verbosity_level, options.logid = 1, "MultiThreadsTest"
    session = _session(rt, MUL, options)
    results: list[np.ndarray] = []

    def run(tag: str) -> None:
        run_options = rt.RunOptions()
        run_options.logid = tag
        results.append(session.run([], {"X": X}, run_options=run_options)[0])

    threads = [threading.Thread(target=run, args=(f"thread{i}",)) for i in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2 and all(np.array_equal(result, X * X) for result in results)


@pytest.mark.parametrize("rt", RUNTIMES)
def test_run_async_passes_the_users_object_and_intra_op_threads_are_honoured(rt: ModuleType) -> None:
    class Data:
        identity = 123456

    done, seen = threading.Event(), dict[str, Any]()

    def callback(outputs, data, error) -> None:
        seen.update(outputs=outputs, data=data, error=error)
        done.set()

    options = rt.SessionOptions()
    options.intra_op_num_threads = 2
    _session(rt, MUL, options).run_async(["Y"], {"X": X}, callback, Data())
    assert done.wait(30)
    assert seen["error"] == "" and seen["data"].identity == 123456
    np.testing.assert_array_equal(seen["outputs"][0], X * X)


@pytest.mark.parametrize("rt", RUNTIMES)
def test_a_pass_through_output_is_a_copy_of_the_input(rt: ModuleType) -> None:
    options = rt.SessionOptions()
    options.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = _session(rt, PASS_THROUGH, options)
    kept = []
    for run in range(4):
        feed = np.full((1, 2, 2, 2), float(run), np.float32)
        outputs = session.run(None, {"input_0": feed})
        assert not np.shares_memory(outputs[1], feed)
        kept.append(outputs)
        feed[:] = -1.0
    for run, (plus_10, same) in enumerate(kept):
        np.testing.assert_array_equal(plus_10, np.full((1, 2, 2, 2), run + 10.0, np.float32))
        np.testing.assert_array_equal(same, np.full((1, 2, 2, 2), float(run), np.float32))


# -- providers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("rt", RUNTIMES)
def test_set_providers_to_an_unknown_name_is_refused(rt: ModuleType) -> None:
    session = _session(rt, MUL)
    with pytest.raises(RuntimeError, match="Unknown Provider Type: InvalidProvider"):
        session.set_providers(["InvalidProvider"])


@pytest.mark.parametrize("rt", RUNTIMES)
def test_check_and_normalize_provider_args(rt: ModuleType) -> None:
    normalize = rt.capi.onnxruntime_inference_collection.check_and_normalize_provider_args
    valid = ["a", "b", "c"]
    accepted: list[tuple[Any, Any, Any]] = [
        (None, None, ([], [])),
        (["a"], None, (["a"], [{}])),
        (["a", "b"], None, (["a", "b"], [{}, {}])),
        ([("a", {1: 2}), "b"], None, (["a", "b"], [{"1": "2"}, {}])),
        (["a", "b"], [{1: 2}, {}], (["a", "b"], [{"1": "2"}, {}])),
    ]
    for providers, options, expected in accepted:
        assert normalize(providers, options, valid) == expected
    with pytest.warns(UserWarning):
        assert normalize(["a", "b", "a"], [{"x": 1}, {}, {"y": 2}], valid) == (["a", "b"], [{"x": "1"}, {}])
    refused: list[tuple[Any, Any]] = [
        (3, None),
        ([3], None),
        (["a"], 3),
        (["a"], ["not dict"]),
        (["a", "b"], [{1: 2}]),
        ([("a", {1: 2})], [{3: 4}]),
    ]
    for providers, options in refused:
        with pytest.raises(ValueError):
            normalize(providers, options, valid)


# -- options -----------------------------------------------------------------------------------
@pytest.mark.parametrize("rt", RUNTIMES)
def test_option_enums_default_and_assign(rt: ModuleType) -> None:
    options = rt.SessionOptions()
    assert options.graph_optimization_level == rt.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    assert options.graph_optimization_level == rt.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    assert options.execution_mode == rt.ExecutionMode.ORT_SEQUENTIAL
    options.execution_mode = rt.ExecutionMode.ORT_PARALLEL
    assert options.execution_mode == rt.ExecutionMode.ORT_PARALLEL
    session = _session(rt, LOGICAL_AND, options)
    session.run([], {"input1:0": np.ones((2, 2), bool), "input:0": np.ones((2, 2), bool)})


@pytest.mark.parametrize("rt", RUNTIMES)
def test_saved_optimized_model_runs(rt: ModuleType, tmp_path: Path) -> None:
    options = rt.SessionOptions()
    options.log_severity_level, options.logid = 1, "TestModelSerialization"
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    _session(rt, MUL, options)
    assert Path(options.optimized_model_filepath).is_file()
    saved = ort.InferenceSession(options.optimized_model_filepath, providers=CPU)
    np.testing.assert_array_equal(saved.run(None, {"X": X})[0], X * X)


@pytest.mark.parametrize("rt", RUNTIMES)
def test_config_from_the_model_when_asked(
    rt: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = onnx.load_from_string(MUL)
    config = {
        "session_options": {"inter_op_num_threads": 5, "intra_op_num_threads": 2, "enable_profiling": 1}
    }
    helper.set_model_props(model, {"ort_config": json.dumps(config)})
    monkeypatch.setenv("ORT_LOAD_CONFIG_FROM_MODEL", "1")
    monkeypatch.chdir(tmp_path)  # the profile is written in the working directory
    session = _session(rt, model.SerializeToString())
    options = session.get_session_options()
    assert (options.inter_op_num_threads, options.intra_op_num_threads) == (5, 2)
    assert options.execution_mode == rt.ExecutionMode.ORT_SEQUENTIAL
    assert options.graph_optimization_level == rt.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert options.enable_profiling
    Path(session.end_profiling()).unlink()


@pytest.mark.parametrize("rt", RUNTIMES)
def test_profile_file_lines(rt: ModuleType, tmp_path: Path) -> None:
    options = rt.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "trace")
    session = _session(rt, MUL, options)
    session.run([], {"X": X})
    lines = Path(session.end_profiling()).read_text().splitlines()
    assert "[" in lines[0] and "]" in lines[-1]
    for line in lines[1:-1]:
        for tag in ("pid", "dur", "ts", "ph", "X", "name", "args"):
            assert tag in line, (tag, line)
    json.loads("\n".join(lines))


@pytest.mark.parametrize("rt", RUNTIMES)
def test_profiling_start_times_follow_the_clock(rt: ModuleType, tmp_path: Path) -> None:
    starts = []
    for index in range(3):
        options = rt.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = str(tmp_path / f"trace{index}")
        session = _session(rt, MUL, options)
        starts.append(session.get_profiling_start_time_ns())
        Path(session.end_profiling()).unlink()
    assert starts == sorted(starts) and starts[0] > 0


# -- OrtValue ----------------------------------------------------------------------------------
@pytest.mark.parametrize("rt", RUNTIMES)
def test_ortvalue_feeds_a_run_and_stays_valid(rt: ModuleType) -> None:
    value = rt.OrtValue.ortvalue_from_numpy(X)
    assert value.device_name() == "cpu" and value.tensor_size_in_bytes() == 4 * 2 * 3
    np.testing.assert_array_equal(_session(rt, MUL).run(["Y"], {"X": value})[0], X * X)
    np.testing.assert_array_equal(value.numpy(), X)
    typed = rt.OrtValue.ortvalue_from_numpy_with_onnx_type(X, TensorProto.FLOAT)
    assert typed.is_tensor() and typed.element_type() == TensorProto.FLOAT and typed.shape() == [3, 2]


@pytest.mark.parametrize("rt", RUNTIMES)
def test_ortvalue_array_protocol(rt: ModuleType) -> None:
    array = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    value = rt.OrtValue.ortvalue_from_numpy(array)
    same = np.asarray(value)
    assert same.dtype == np.float32 and same.ctypes.data == value.data_ptr()
    np.testing.assert_array_equal(np.array(value), array)
    assert np.asarray(value, dtype=np.float32).ctypes.data == value.data_ptr()
    widened = np.asarray(value, dtype=np.float64)
    assert widened.dtype == np.float64
    np.testing.assert_array_equal(widened, array)
    for other in (np.array([1, 2, 3], np.int64), np.array([True, False, True])):
        got = np.asarray(rt.OrtValue.ortvalue_from_numpy(other))
        assert got.dtype == other.dtype
        np.testing.assert_array_equal(got, other)


@pytest.mark.parametrize("rt", RUNTIMES)
def test_ortvalue_dlpack_protocol(rt: ModuleType) -> None:
    array = X.copy()
    value = rt.OrtValue.ortvalue_from_numpy(array)
    assert value.__dlpack_device__() == (1, 0)
    from_capsule = rt.OrtValue.from_dlpack(value.__dlpack__())
    np.testing.assert_array_equal(from_capsule.numpy(), array)
    from_object = rt.OrtValue.from_dlpack(value)
    assert from_object.data_ptr() == value.data_ptr()
    vector = np.arange(4, dtype=np.float32)
    assert rt.OrtValue.from_dlpack(vector).shape() == [4]
    for shape in ((1, 8, 0, 128), (0,), (0, 4), (4, 0)):
        assert rt.OrtValue.from_dlpack(np.zeros(shape, np.float32)).shape() == list(shape)
    flags = rt.OrtValue.from_dlpack(rt.OrtValue.ortvalue_from_numpy(np.array([True, False])))
    assert flags.numpy().dtype == np.bool_
    small = rt.OrtValue.from_dlpack(rt.OrtValue.ortvalue_from_numpy(np.array([1, 2, 255], np.uint8)))
    assert small.numpy().dtype == np.uint8


# -- devices, memory and allocators ------------------------------------------------------------
@pytest.mark.parametrize("rt", RUNTIMES)
def test_ort_device(rt: ModuleType) -> None:
    cpu = rt.OrtDevice.make("cpu", 0)
    assert (cpu.device_id(), cpu.device_type(), cpu.device_mem_type()) == (0, 0, 0)
    assert cpu.device_vendor_id() == rt.OrtDeviceVendorId.NONE
    assert rt.OrtDevice.make("cuda", 0).device_vendor_id() == rt.OrtDeviceVendorId.NVIDIA == 0x10DE


@pytest.mark.parametrize("rt", RUNTIMES)
def test_ort_memory_info(rt: ModuleType) -> None:
    info = rt.OrtMemoryInfo("Cpu", rt.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, rt.OrtMemType.DEFAULT)
    assert (info.name, info.device_id, info.device_vendor_id) == ("Cpu", 0, 0)
    assert info.mem_type == rt.OrtMemType.DEFAULT
    assert info.allocator_type == rt.OrtAllocatorType.ORT_ARENA_ALLOCATOR
    assert info.device_mem_type == rt.OrtDeviceMemoryType.DEFAULT
    v2 = rt.OrtMemoryInfo.create_v2(
        "Test",
        rt.OrtMemoryInfoDeviceType.CPU,
        0,
        0,
        rt.OrtDeviceMemoryType.DEFAULT,
        128,
        rt.OrtAllocatorType.ORT_ARENA_ALLOCATOR,
    )
    assert (v2.name, v2.device_id, v2.mem_type) == ("Test", 0, rt.OrtMemType.DEFAULT)
    rt.create_and_register_allocator(info, None)
    options = rt.SessionOptions()
    options.add_session_config_entry("session.use_env_allocators", "1")
    _session(rt, MUL, options)


@pytest.mark.parametrize("rt", RUNTIMES)
def test_arena_config(rt: ModuleType) -> None:
    ordered = rt.OrtArenaCfg(8, 0, 4, 2)
    assert (ordered.max_mem, ordered.arena_extend_strategy) == (8, 0)
    assert (ordered.initial_chunk_size_bytes, ordered.max_dead_bytes_per_chunk) == (4, 2)
    settings = {
        "max_mem": 32,
        "arena_extend_strategy": 11,
        "initial_chunk_size_bytes": 18,
        "max_dead_bytes_per_chunk": 14,
        "initial_growth_chunk_size_bytes": 12,
        "max_power_of_two_extend_bytes": 17,
    }
    keyed = rt.OrtArenaCfg(settings)
    assert {key: getattr(keyed, key) for key in settings} == settings


@pytest.mark.parametrize("rt", RUNTIMES)
def test_run_config_entries_and_arena_shrinkage(rt: ModuleType) -> None:
    run_options = rt.RunOptions()
    run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert run_options.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    np.testing.assert_array_equal(_session(rt, MUL).run([], {"X": X}, run_options)[0], X * X)


def test_spawnml_errors_stay_spawnml_errors() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(spawnml.SpawnMLError):
            _session(sort, MUL).set_providers(["InvalidProvider"])
