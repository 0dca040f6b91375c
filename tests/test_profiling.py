"""Session profiling (onnxruntime's ``enable_profiling`` and ``end_profiling``) and ``spawnml profile``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
import spawnml
from onnx import TensorProto, helper
from spawnml import plugins
from spawnml.cli import main
from spawnml.profiler import summarize

from tests.backends import backend_or_skip
from tests.model_files import require

RUNS = 3
FEEDS = {"x": np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)}
TRACE_KEYS = {"cat", "pid", "tid", "ts", "dur", "ph", "name", "args"}


@pytest.fixture(autouse=True)
def fresh_plugins():
    plugins.reset()
    yield
    plugins.reset()


def small_model() -> bytes:
    """MatMul, Add, Relu and Softmax over ``x: float[n, 4]``."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="project"),
        helper.make_node("Add", ["m", "b"], ["a"], name="bias"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
        [
            onnx.numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w"),
            onnx.numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def profiled_session(**options) -> spawnml.InferenceSession:
    # unoptimized, so that every node of the file runs and is recorded under its own name
    settings = spawnml.SessionOptions(graph_optimization_level="disable", enable_profiling=True, **options)
    return spawnml.InferenceSession(small_model(), settings, providers=["cpu"])


def test_trace_is_chrome_format_with_one_event_per_node_per_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    session = profiled_session()
    for _ in range(RUNS):
        session.run(None, FEEDS)
    path = session.end_profiling()
    assert re.fullmatch(r"spawnml_profile_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d{3}\.json", path), path
    events = json.loads((tmp_path / path).read_text())
    assert isinstance(events, list)
    for event in events:
        assert set(event) == TRACE_KEYS and event["ph"] == "X"
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        assert event["ts"] >= 0 and event["dur"] >= 0 and isinstance(event["args"], dict)
    sessions = [event["name"] for event in events if event["cat"] == "Session"]
    assert sessions == ["model_loading", "session_initialization", *["model_run"] * RUNS]
    runs = [event for event in events if event["name"] == "model_run"]
    nodes = [event for event in events if event["cat"] == "Node"]
    assert len(nodes) == 4 * RUNS
    for run in runs:  # each run holds each node once, inside its span, and outlasts their sum
        inside = [e for e in nodes if run["ts"] <= e["ts"] and e["ts"] + e["dur"] <= run["ts"] + run["dur"]]
        assert sorted(e["name"] for e in inside) == ["bias", "project", "relu", "softmax"]
        assert sum(e["dur"] for e in inside) <= run["dur"]
    first = {event["name"]: event["args"] for event in nodes[:4]}
    assert first["project"] == {
        "op_name": "MatMul",
        "provider": "cpu",
        "input_type_shape": [{"float": [2, 4]}, {"float": [4, 3]}],
        "output_type_shape": [{"float": [2, 3]}],
        "depth": 0,
    }


def test_end_profiling_returns_empty_when_not_profiling_as_onnxruntime(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    session = profiled_session(profile_file_prefix="custom")
    session.run(None, FEEDS)
    assert session.get_profiling_start_time_ns() > 0
    assert session.end_profiling().startswith("custom_")
    session.run(None, FEEDS)  # no longer profiled
    assert session.end_profiling() == ""
    assert session.get_profiling_start_time_ns() == 0
    plain = spawnml.InferenceSession(small_model(), providers=["cpu"])
    plain.run(None, FEEDS)
    assert plain.end_profiling() == ""
    assert [p.name for p in tmp_path.iterdir()] == [next(tmp_path.glob("custom_*.json")).name]


def test_profiling_changes_no_result():
    plain = spawnml.InferenceSession(small_model(), providers=["cpu"])
    profiled = profiled_session()
    np.testing.assert_array_equal(plain.run(None, FEEDS)[0], profiled.run(None, FEEDS)[0])


def test_start_profiling_after_warm_up_records_later_runs_only(tmp_path):
    session = spawnml.InferenceSession(small_model(), providers=["cpu"])
    session.run(None, FEEDS)
    session.start_profiling(str(tmp_path / "later"))
    with pytest.raises(spawnml.errors.InvalidArgumentError, match="already profiling"):
        session.start_profiling()
    session.run_with_tensors(None, FEEDS)
    events = json.loads(Path(session.end_profiling()).read_text())
    assert [e["name"] for e in events if e["cat"] == "Session"] == ["model_run"]
    assert summarize(events).runs == 1


def test_subgraph_nodes_nest_in_the_node_that_runs_them(tmp_path):
    """An If's branch nodes are recorded at depth 1 and left out of the summary (the If holds them)."""
    branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["z"], name="negate")],
        "branch",
        [],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
    )
    graph = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
            helper.make_node("If", ["c"], ["y"], name="choose", then_branch=branch, else_branch=branch),
        ],
        "with_if",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(np.zeros((), np.float32), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    options = spawnml.SessionOptions(
        graph_optimization_level="disable",
        enable_profiling=True,
        profile_file_prefix=str(tmp_path / "if"),
    )
    session = spawnml.InferenceSession(model, options, providers=["cpu"])
    session.run(None, FEEDS)
    events = json.loads(Path(session.end_profiling()).read_text())
    depths = {e["name"]: e["args"]["depth"] for e in events if e["cat"] == "Node"}
    assert depths == {"sum": 0, "positive": 0, "choose": 0, "negate": 1}
    assert {row.op_type for row in summarize(events).op_types} == {"ReduceSum", "Greater", "If"}


@pytest.mark.parametrize("backend", ["webgpu", "opencl", "cuda"])
def test_gpu_nodes_are_recorded_on_their_provider_without_changing_results(backend, tmp_path):
    """On a GPU a node's time is the host's launch; the results stay those of an unprofiled run."""
    backend_or_skip(backend)
    options = spawnml.SessionOptions(
        graph_optimization_level="disable", enable_profiling=True, profile_file_prefix=str(tmp_path / "gpu")
    )
    profiled = spawnml.InferenceSession(small_model(), options, providers=[backend])
    plain = spawnml.InferenceSession(small_model(), providers=[backend])
    np.testing.assert_array_equal(profiled.run(None, FEEDS)[0], plain.run(None, FEEDS)[0])
    events = json.loads(Path(profiled.end_profiling()).read_text())
    nodes = [e for e in events if e["cat"] == "Node"]
    assert len(nodes) == 4 and {e["args"]["provider"] for e in nodes} == {backend}


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "small.onnx"
    path.write_bytes(small_model())
    return path


def test_cli_profile_lists_every_operator_type_and_writes_the_trace(model_file, tmp_path, capsys):
    trace = tmp_path / "trace.json"
    args = ["profile", str(model_file), "--runs", str(RUNS), "--warmup", "1", "--dim", "n=5"]
    assert main([*args, "--optimization-level", "disable", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "By operator type:" in out and "Slowest nodes" in out
    for op_type in ("MatMul", "Add", "Relu", "Softmax"):
        assert op_type in out
    events = json.loads(trace.read_text())
    assert sum(e["name"] == "model_run" for e in events) == RUNS  # the warm-up is not in it
    shapes = {e["args"]["output_type_shape"][0]["float"][0] for e in events if e["cat"] == "Node"}
    assert shapes == {5}  # the dynamic dimension given by --dim


def test_cli_profile_json_with_given_input(model_file, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones((7, 4), np.float32))
    args = [
        "profile",
        str(model_file),
        "--runs",
        "2",
        "-i",
        f"x={tmp_path / 'x.npy'}",
        "--json",
        "--top",
        "1",
    ]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == 2 and len(report["nodes"]) == 1
    assert sum(row["share"] for row in report["op_types"]) == pytest.approx(1.0)
    assert {row["calls"] for row in report["op_types"]} == {2}


def test_cli_profile_refuses_bad_arguments(model_file, capsys):
    assert main(["profile", str(model_file), "--dim", "n=many"]) == 1
    assert "--dim takes NAME=VALUE" in capsys.readouterr().err
    assert main(["profile", str(model_file), "--runs", "0"]) == 1
    assert "--runs must be at least 1" in capsys.readouterr().err


@pytest.mark.real_model
def test_cli_profile_minilm_spends_its_time_in_matmul(capsys):
    from spawnml_models.assets import asset_file
    from spawnml_models.embeddings import MODEL_ASSET

    model = require(lambda: asset_file(MODEL_ASSET, "model.onnx"))
    args = ["profile", str(model), "--runs", "2", "--warmup", "1", "--dim", "sequence=64", "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert "MatMul" in [row["op_type"] for row in report["op_types"][:3]]
