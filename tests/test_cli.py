"""The ``spawnml`` command against the installed CPU backend and ONNX loader."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper
from spawnml import plugins
from spawnml.cli import main


@pytest.fixture(autouse=True)
def fresh_plugins():
    plugins.reset()
    yield
    plugins.reset()


def small_model(path):
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Relu", ["m"], ["y"]),
    ]
    weight = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    graph = helper.make_graph(
        nodes,
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])],
        [onnx.numpy_helper.from_array(weight, "w")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_plugins_json_lists_cpu_backend_onnx_format_and_versions(capsys):
    assert main(["plugins", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    cpu = next(b for b in report["backends"] if b["name"] == "cpu")
    assert cpu["available"] and cpu["device"]
    assert any(f["name"] == "onnx" for f in report["formats"])
    dists = {p["distribution"]: p["version"] for p in report["plugins"]}
    assert dists["spawnml-cpu"] == "0.1.0" and dists["spawnml-formats"] == "0.1.0"


def test_plugins_restricted_by_environment(capsys, monkeypatch):
    monkeypatch.setenv("SPAWNML_PLUGINS", "onnx")
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "No backend is installed" in out
    assert "onnx" in out


def test_info_shows_io_opsets_and_operator_support(tmp_path, capsys):
    path = small_model(tmp_path / "small.onnx")
    assert main(["info", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["inputs"] == [{"name": "x", "type": "tensor(float)", "shape": ["n", 4]}]
    assert report["opsets"] == {"ai.onnx": 17}
    ops = {op["op_type"]: (op["count"], op["backends"]["cpu"]) for op in report["operators"]}
    assert ops == {"MatMul": (1, True), "Relu": (1, True)}


def test_run_writes_outputs_matching_onnxruntime(tmp_path, capsys):
    path = small_model(tmp_path / "small.onnx")
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out.npz"
    assert main(["run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--output", str(out)]) == 0
    (want,) = onnxruntime.InferenceSession(str(path)).run(None, {"x": x})
    np.testing.assert_allclose(np.load(out)["y"], want, rtol=1e-6, atol=1e-6)
    assert "y: float [3, 2]" in capsys.readouterr().out


def test_errors_are_one_line_without_traceback(tmp_path, capsys):
    bogus = tmp_path / "bogus.bin"
    bogus.write_bytes(b"\x00\x01not a model")
    assert main(["info", str(bogus)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("spawnml: error: ") and "Traceback" not in err


def test_operators_lists_versions_and_native_backends(capsys):
    assert main(["operators", "--json"]) == 0
    rows = {(row["domain"], row["op_type"]): row for row in json.loads(capsys.readouterr().out)}
    assert rows[("ai.onnx", "Softmax")]["versions"] == [1, 13]
    assert "cpu" in rows[("ai.onnx", "Softmax")]["backends"]
