"""spawnml.onnxruntime against the real onnxruntime on the same small models: the behaviours
onnxruntime's own Python API tests check, each asserted on both runtimes."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
import spawnml  # noqa: E402
import spawnml.onnxruntime as sort  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from spawnml.onnxruntime.capi import onnxruntime_pybind11_state as state  # noqa: E402

RUNTIMES = [pytest.param(ort, id="onnxruntime"), pytest.param(sort, id="spawnml")]


def _model(**metadata: str) -> bytes:
    """X[N,3] -> Y = Relu(X) [None,3] and Z = Neg(X) (undeclared shape), with model metadata."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 3])
    z = helper.make_tensor_value_info("Z", TensorProto.FLOAT, None)
    graph = helper.make_graph(
        [helper.make_node("Relu", ["X"], ["Y"]), helper.make_node("Neg", ["X"], ["Z"])], "g", [x], [y, z]
    )
    model = helper.make_model(
        graph,
        producer_name="spawnml-tests",
        doc_string="two outputs",
        domain="org.spawnml",
        model_version=7,
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    helper.set_model_props(model, {"author": "tests", "kind": "toy", **metadata})
    return model.SerializeToString()


def _matmul_model() -> bytes:
    """A[batch,4] @ W (initializer, overridable) + B."""
    a = helper.make_tensor_value_info("A", TensorProto.FLOAT, ["batch", 4])
    w = helper.make_tensor_value_info("W", TensorProto.FLOAT, [4, 2])
    out = helper.make_tensor_value_info("O", TensorProto.FLOAT, ["batch", 2])
    weights = helper.make_tensor("W", TensorProto.FLOAT, [4, 2], np.arange(8, dtype=np.float32).tolist())
    graph = helper.make_graph([helper.make_node("MatMul", ["A", "W"], ["O"])], "mm", [a, w], [out], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


MODEL = _model()
X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)


def _session(rt, model: bytes = MODEL, options=None, **kwargs):
    return rt.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"], **kwargs)


def _both(model: bytes = MODEL, **kwargs):
    return _session(ort, model, **kwargs), _session(sort, model, **kwargs)


# -- metadata -----------------------------------------------------------------------------------
def test_inputs_and_outputs_describe_the_model_as_onnxruntime_does() -> None:
    real, ours = _both()
    for get in ("get_inputs", "get_outputs"):
        assert [(a.name, a.type, a.shape) for a in getattr(ours, get)()] == [
            (a.name, a.type, a.shape) for a in getattr(real, get)()
        ]
    assert str(ours.get_inputs()[0]) == str(real.get_inputs()[0])


def test_model_metadata_is_the_files() -> None:
    real, ours = _both()
    for field in ("producer_name", "graph_name", "domain", "description", "version", "custom_metadata_map"):
        assert getattr(ours.get_modelmeta(), field) == getattr(real.get_modelmeta(), field), field


def test_overridable_initializers() -> None:
    real, ours = _both(_matmul_model())
    assert [(a.name, a.type, a.shape) for a in ours.get_overridable_initializers()] == [
        (a.name, a.type, a.shape) for a in real.get_overridable_initializers()
    ]
    a = np.ones((2, 4), np.float32)
    w = np.eye(4, 2, dtype=np.float32)
    np.testing.assert_array_equal(ours.run(None, {"A": a, "W": w})[0], real.run(None, {"A": a, "W": w})[0])


# -- running ------------------------------------------------------------------------------------
@pytest.mark.parametrize("names", [None, [], ["Z"], ["Z", "Y"]])
def test_run_with_all_or_some_outputs(names) -> None:
    real, ours = _both()
    expected = real.run(names, {"X": X})
    got = ours.run(names, {"X": X})
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_python_lists_are_converted_to_the_declared_type() -> None:
    real, ours = _both()
    np.testing.assert_array_equal(
        ours.run(["Z"], {"X": [[1, 2, 3]]})[0], real.run(["Z"], {"X": [[1, 2, 3]]})[0]
    )


@pytest.mark.parametrize(
    ("feed", "names", "ort_class"),
    [
        ({"X": X, "W": X}, None, state.InvalidArgument),  # unknown input name
        ({"X": X.astype(np.float64)}, None, state.InvalidArgument),  # wrong element type
        ({"X": np.ones((2, 4), np.float32)}, None, state.InvalidArgument),  # wrong dimension
        ({"X": np.ones(3, np.float32)}, None, state.InvalidArgument),  # wrong rank
        ({"X": X}, ["Q"], state.InvalidArgument),  # unknown output name
        ({"W": X}, None, ValueError),  # required input missing: a plain ValueError in onnxruntime
    ],
    ids=["input-name", "type", "dimension", "rank", "output-name", "missing"],
)
def test_bad_runs_raise_what_onnxruntime_raises(feed, names, ort_class) -> None:
    real, ours = _both()
    real_class = getattr(ort.capi.onnxruntime_pybind11_state, ort_class.__name__, ort_class)
    with pytest.raises(real_class):
        real.run(names, feed)
    with pytest.raises(ort_class) as raised:
        ours.run(names, feed)
    assert isinstance(raised.value, spawnml.SpawnMLError)
    if ort_class is not ValueError:
        assert isinstance(raised.value, spawnml.InvalidFeedError | spawnml.InvalidArgumentError)


def test_loading_errors() -> None:
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.NoSuchFile):
        ort.InferenceSession("/no/such/model.onnx")
    with pytest.raises(state.NoSuchFile) as missing:
        sort.InferenceSession("/no/such/model.onnx")
    assert isinstance(missing.value, spawnml.ModelLoadError)
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidProtobuf):
        ort.InferenceSession(b"not a model")
    with pytest.raises(state.InvalidProtobuf) as garbage:
        sort.InferenceSession(b"not a model")
    assert isinstance(garbage.value, spawnml.ModelLoadError)


def test_terminate_refuses_the_run_and_clears() -> None:
    for rt, fail in ((ort, ort.capi.onnxruntime_pybind11_state.Fail), (sort, state.Fail)):
        session = _session(rt)
        options = rt.RunOptions()
        options.terminate = True
        with pytest.raises(fail):
            session.run(None, {"X": X}, options)
        options.terminate = False
        assert session.run(["Y"], {"X": X}, options)[0].shape == (2, 3)


def test_run_options_attributes() -> None:
    options = sort.RunOptions()
    options.run_tag = "tag"
    assert options.logid == "tag"
    options.add_run_config_entry("k", "v")
    assert options.get_run_config_entry("k") == "v"
    real, fresh = ort.RunOptions(), sort.RunOptions()
    for name in (n for n in dir(real) if not n.startswith("_")):
        assert hasattr(fresh, name), name
        if not callable(getattr(real, name)):
            assert getattr(fresh, name) == getattr(real, name), name


def test_run_async_calls_back_with_outputs() -> None:
    for rt in (ort, sort):
        done = threading.Event()
        seen: dict[str, Any] = {}

        def callback(outputs, user_data, error, seen=seen, done=done):
            seen.update(outputs=outputs, user_data=user_data, error=error)
            done.set()

        _session(rt).run_async(["Y"], {"X": X}, callback, "data")
        assert done.wait(30)
        assert seen["user_data"] == "data" and seen["error"] == ""
        np.testing.assert_array_equal(seen["outputs"][0], np.maximum(X, 0))


# -- OrtValue -----------------------------------------------------------------------------------
@pytest.mark.parametrize("rt", RUNTIMES)
def test_ortvalue_round_trip_shares_host_memory(rt) -> None:
    array = X.copy()
    value = rt.OrtValue.ortvalue_from_numpy(array)
    assert value.shape() == [2, 3]
    assert value.data_type() == "tensor(float)"
    assert value.element_type() == TensorProto.FLOAT
    assert value.device_name().lower() == "cpu"
    assert value.is_tensor() and value.has_value() and not value.is_tensor_sequence()
    array[0, 0] = 42.0
    assert value.numpy()[0, 0] == 42.0  # the value holds the caller's array
    assert value.data_ptr() == array.ctypes.data


@pytest.mark.parametrize("rt", RUNTIMES)
def test_ortvalue_from_shape_and_type(rt) -> None:
    for element_type in (np.int64, TensorProto.INT64):
        value = rt.OrtValue.ortvalue_from_shape_and_type([3, 1], element_type)
        assert value.shape() == [3, 1] and value.data_type() == "tensor(int64)"
        value.update_inplace(np.array([[1], [2], [3]], np.int64))
        np.testing.assert_array_equal(value.numpy(), [[1], [2], [3]])


def test_ortvalue_dlpack_is_zero_copy() -> None:
    array = X.copy()
    value = sort.OrtValue.from_dlpack(array)
    assert value.data_ptr() == array.ctypes.data
    back = np.from_dlpack(value)
    assert back.ctypes.data == array.ctypes.data


def test_run_with_ort_values_matches() -> None:
    real, ours = _both()
    got = ours.run_with_ort_values(["Z"], {"X": sort.OrtValue.ortvalue_from_numpy(X)})
    expected = real.run_with_ort_values(["Z"], {"X": ort.OrtValue.ortvalue_from_numpy(X)})
    assert isinstance(got[0], sort.OrtValue)
    np.testing.assert_array_equal(got[0].numpy(), expected[0].numpy())


# -- IOBinding ----------------------------------------------------------------------------------
@pytest.mark.parametrize("rt", RUNTIMES)
def test_iobinding_to_cpu(rt) -> None:
    session = _session(rt)
    binding = session.io_binding()
    binding.bind_cpu_input("X", X)
    binding.bind_output("Y")
    binding.bind_output("Z", "cpu")
    session.run_with_iobinding(binding)
    y, z = binding.copy_outputs_to_cpu()
    np.testing.assert_array_equal(y, np.maximum(X, 0))
    np.testing.assert_array_equal(z, -X)
    assert [value.shape() for value in binding.get_outputs()] == [[2, 3], [2, 3]]


@pytest.mark.parametrize("rt", RUNTIMES)
def test_iobinding_into_preallocated_values(rt) -> None:
    session = _session(rt)
    binding = session.io_binding()
    binding.bind_ortvalue_input("X", rt.OrtValue.ortvalue_from_numpy(X))
    target = rt.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32)
    binding.bind_ortvalue_output("Z", target)
    session.run_with_iobinding(binding)
    np.testing.assert_array_equal(target.numpy(), -X)


@pytest.mark.parametrize("rt", RUNTIMES)
def test_iobinding_raw_host_pointers(rt) -> None:
    session = _session(rt)
    source = X.copy()
    out = np.zeros((2, 3), np.float32)
    binding = session.io_binding()
    binding.bind_input("X", "cpu", 0, np.float32, [2, 3], source.ctypes.data)
    binding.bind_output("Y", "cpu", 0, np.float32, [2, 3], out.ctypes.data)
    session.run_with_iobinding(binding)
    np.testing.assert_array_equal(out, np.maximum(X, 0))
    assert ctypes.c_float.from_address(out.ctypes.data).value == 1.0


# -- providers ----------------------------------------------------------------------------------
def test_unknown_providers_are_warned_and_skipped() -> None:
    for rt in (ort, sort):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            session = rt.InferenceSession(
                MODEL, providers=["NoSuchExecutionProvider", "CPUExecutionProvider"]
            )
        assert session.get_providers() == ["CPUExecutionProvider"]
        assert any("NoSuchExecutionProvider" in str(w.message) for w in caught)


def test_providers_with_options() -> None:
    session = sort.InferenceSession(MODEL, providers=[("CPUExecutionProvider", {"arena": 1})])
    assert session.get_provider_options() == {"CPUExecutionProvider": {"arena": "1"}}
    session = sort.InferenceSession(MODEL, providers=["CPUExecutionProvider"], provider_options=[{"a": True}])
    assert session.get_provider_options() == {"CPUExecutionProvider": {"a": "True"}}
    # onnxruntime 1.32's constructor lets this pass; its check_and_normalize_provider_args raises
    # ValueError, as SpawnML does here
    with pytest.raises(ValueError) as raised:
        sort.InferenceSession(MODEL, providers=["CPUExecutionProvider"], provider_options=[{}, {}])
    assert isinstance(raised.value, spawnml.InvalidArgumentError)


def test_provider_map_remaps(monkeypatch) -> None:
    try:
        sort.set_provider_map({"CUDAExecutionProvider": "cpu"})
        session = sort.InferenceSession(MODEL, providers=["CUDAExecutionProvider"])
        assert session.get_providers() == ["CUDAExecutionProvider"]
        assert session._sess.get_providers() == ["cpu"]
    finally:
        sort.set_provider_map(None)
    monkeypatch.setenv("SPAWNML_ORT_PROVIDERS", "TensorrtExecutionProvider=cpu")
    session = sort.InferenceSession(MODEL, providers=["TensorrtExecutionProvider"])
    assert session.get_providers() == ["TensorrtExecutionProvider"]


def test_set_providers_plans_again() -> None:
    session = _session(sort)
    session.set_providers(["CPUExecutionProvider"])
    assert session.get_providers() == ["CPUExecutionProvider"]
    np.testing.assert_array_equal(session.run(["Y"], {"X": X})[0], np.maximum(X, 0))


def test_module_functions() -> None:
    assert sort.get_all_providers() == ort.get_all_providers()
    assert sort.get_available_providers()[-1] == "CPUExecutionProvider"
    assert sort.get_device() in ("CPU", "GPU")
    assert sort.get_version_string() == sort.__version__
    sort.set_default_logger_severity(3)
    sort.set_default_logger_verbosity(0)
    for name in ("GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder"):
        ours, real = getattr(sort, name), getattr(ort, name)
        assert {k: int(v) for k, v in ours.__members__.items()} == {
            k: int(v) for k, v in real.__members__.items()
        }
        assert str(next(iter(ours))) == str(next(iter(real.__members__.values())))


def test_capi_exception_classes() -> None:
    names = (
        "Fail InvalidArgument NoSuchFile NoModel EngineError RuntimeException InvalidProtobuf ModelLoaded "
    )
    names += "NotImplemented InvalidGraph EPFail"
    from spawnml.onnxruntime.capi import _pybind_state, onnxruntime_inference_collection

    for name in names.split():
        assert issubclass(getattr(state, name), Exception)
        assert getattr(_pybind_state, name) is getattr(state, name)
    assert onnxruntime_inference_collection.InferenceSession is sort.InferenceSession


# -- SessionOptions -----------------------------------------------------------------------------
def test_session_options_have_every_attribute_with_onnxruntime_defaults() -> None:
    real, ours = ort.SessionOptions(), sort.SessionOptions()
    for name in (n for n in dir(real) if not n.startswith("_")):
        assert hasattr(ours, name), name
        if not callable(getattr(real, name)):
            value = getattr(real, name)
            assert getattr(ours, name) == (int(value) if hasattr(value, "__members__") else value), name


def test_session_config_entries() -> None:
    for rt in (ort, sort):
        options = rt.SessionOptions()
        options.add_session_config_entry("session.load_model_format", "ONNX")
        assert options.get_session_config_entry("session.load_model_format") == "ONNX"
        with pytest.raises(RuntimeError):
            options.get_session_config_entry("missing")


def test_custom_operator_libraries_are_refused() -> None:
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail):
        ort.SessionOptions().register_custom_ops_library("/no/such/library.so")
    with pytest.raises(state.Fail, match="SpawnML"):
        sort.SessionOptions().register_custom_ops_library("/no/such/library.so")


def test_free_dimension_override() -> None:
    shapes = []
    for rt in (ort, sort):
        options = rt.SessionOptions()
        options.add_free_dimension_override_by_name("N", 2)
        session = _session(rt, options=options)
        shapes.append(session.get_inputs()[0].shape)
        with pytest.raises(rt.capi.onnxruntime_pybind11_state.InvalidArgument):
            session.run(None, {"X": np.ones((5, 3), np.float32)})
    assert shapes == [[2, 3], [2, 3]]


def test_optimization_level_and_saved_model(tmp_path: Path) -> None:
    options = sort.SessionOptions()
    options.graph_optimization_level = sort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.optimized_model_filepath = str(tmp_path / "saved.onnx")
    ours = _session(sort, options=options)
    assert ours.get_session_options() is options
    saved = ort.InferenceSession(str(tmp_path / "saved.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(saved.run(None, {"X": X})[1], ours.run(None, {"X": X})[1])


def test_add_initializer_replaces_weights() -> None:
    weights = np.ones((4, 2), np.float32)
    outputs = []
    for rt in (ort, sort):
        options = rt.SessionOptions()
        value = rt.OrtValue.ortvalue_from_numpy(weights)  # onnxruntime reads it only while it lives
        options.add_initializer("W", value)
        outputs.append(
            _session(rt, _matmul_model(), options=options).run(None, {"A": np.ones((1, 4), np.float32)})[0]
        )
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_profiling(tmp_path: Path) -> None:
    options = sort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "trace")
    session = _session(sort, options=options)
    assert session.get_profiling_start_time_ns() > 0
    session.run(None, {"X": X})
    path = session.end_profiling()
    assert Path(path).is_file() and Path(path).name.startswith("trace")
    assert _session(sort).end_profiling() == ""


# -- install --------------------------------------------------------------------------------------
def test_install_routes_imports(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(
        "import sys\n"
        "import onnxruntime as rt\n"
        "from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument\n"
        "from onnxruntime.capi import _pybind_state\n"
        "import onnxruntime.capi.onnxruntime_inference_collection as collection\n"
        "assert rt.__name__ == 'spawnml.onnxruntime', rt\n"
        "assert collection.InferenceSession is rt.InferenceSession\n"
        "print('ran', sys.argv[1:])\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "spawnml.onnxruntime", str(script), "a", "b"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "ran ['a', 'b']" in done.stdout
    code = (
        "import spawnml.onnxruntime as s; s.install(); import onnxruntime, importlib\n"
        "assert onnxruntime is s\n"
        "try:\n    importlib.import_module('onnxruntime.no_such_module')\nexcept ImportError: pass\n"
        "else: raise SystemExit('imported a module that does not exist')\n"
        "s.uninstall(); import onnxruntime as real; assert real is not s\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_python_m_runs_modules_and_says_how() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "spawnml.onnxruntime", "-m", "platform"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip(), done.stderr
    done = subprocess.run([sys.executable, "-m", "spawnml.onnxruntime"], capture_output=True, text=True)
    assert done.returncode == 2 and "usage" in done.stderr
