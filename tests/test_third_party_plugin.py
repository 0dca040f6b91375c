"""A third-party plugin, installed from tests/plugins/spawnml-example-plugin, works end to end.

It registers an operator (``com.example::Swish``), a backend (``example``) and a format
(``exgraph``) through the ``spawnml`` entry-point group, with no change to core. Results
are checked against numpy in float64 and against the CPU backend.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import spawnml
import spawnml_example.plugin
from spawnml import (
    BackendUnavailableError,
    InvalidGraphError,
    UnknownFormatError,
    UnsupportedOperatorError,
    plugins,
)
from spawnml.cli import main
from spawnml.ir import Graph
from spawnml.planner import Transfer
from spawnml_example.backend import ExampleBuffer
from spawnml_example.exgraph import MAGIC

RNG = np.random.default_rng(5)
X = RNG.standard_normal((3, 4)).astype(np.float32) * 3
W = RNG.standard_normal((4, 5)).astype(np.float32)
B = RNG.standard_normal(5).astype(np.float32)
C = RNG.standard_normal(4).astype(np.float32)


@pytest.fixture(autouse=True)
def fresh_plugins():
    plugins.reset()
    yield
    plugins.reset()


def exgraph(nodes: list[dict], outputs: list[str], dtype: str = "float32") -> bytes:
    """An exgraph file reading ``x`` (n x 4), with initializers ``w``, ``b`` and ``c``."""
    document = {
        "name": "example",
        "opsets": {"": 17, "com.example": 1},
        "inputs": [{"name": "x", "dtype": dtype, "shape": ["n", 4]}],
        "outputs": [{"name": name, "dtype": "float32"} for name in outputs],
        "initializers": {
            "w": {"dtype": "float32", "shape": [4, 5], "data": W.tolist()},
            "b": {"dtype": "float32", "shape": [5], "data": B.tolist()},
            "c": {"dtype": "float32", "shape": [4], "data": C.tolist()},
        },
        "nodes": nodes,
    }
    return MAGIC + json.dumps(document).encode()


SWISH = {"name": "swish", "op": "Swish", "domain": "com.example", "inputs": ["x"], "outputs": ["s"]}
#: swish (example) -> MatMul (cpu) -> Add (example) -> Softmax (cpu)
MIXED = exgraph(
    [
        {**SWISH, "attrs": {"beta": 1.5}},
        {"name": "project", "op": "MatMul", "inputs": ["s", "w"], "outputs": ["m"]},
        {"name": "shift", "op": "Add", "inputs": ["m", "b"], "outputs": ["a"]},
        {"name": "softmax", "op": "Softmax", "inputs": ["a"], "outputs": ["y"], "attrs": {"axis": -1}},
    ],
    ["y", "a"],
)


def reference(x: np.ndarray, beta: float = 1.5) -> tuple[np.ndarray, np.ndarray]:
    """``MIXED`` in float64 numpy: softmax(swish(x) @ w + b) and the logits."""
    x = x.astype(np.float64)
    logits = (x / (1 + np.exp(-beta * x))) @ W + B
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True), logits


def test_entry_point_loads_with_its_distribution_and_registrations():
    info = plugins.registry().plugins["example"]
    assert (info.distribution, info.version, info.builtin) == ("spawnml-example-plugin", "0.1.0", False)
    assert info.provides == {
        "backends": ["example"],
        "formats": ["exgraph"],
        "operators": ["com.example::Swish-1"],
    }
    assert plugins.operators().lookup("com.example", "Swish", 1).name == "Swish"


def test_format_is_detected_by_magic_bytes_and_lowered_to_the_ir(tmp_path):
    path = tmp_path / "model.bin"  # no known extension: found by its first bytes
    path.write_bytes(MIXED)
    graph = spawnml.load(path)
    assert [node.op_type for node in graph.nodes] == ["Swish", "MatMul", "Add", "Softmax"]
    assert graph.nodes[0].domain == "com.example" and graph.nodes[0].attrs == {"beta": 1.5}
    assert graph.opset_imports == {"": 17, "com.example": 1}
    assert graph.inputs[0].shape == ("n", 4) and graph.inputs[0].dtype == np.float32
    np.testing.assert_array_equal(graph.initializers["w"], W)


def test_bad_exgraph_file_is_refused_with_its_reason():
    with pytest.raises(spawnml.ModelLoadError, match=r"not a valid exgraph file: KeyError\('nodes'\)"):
        spawnml.load(MAGIC + b'{"opsets": {}, "inputs": [], "outputs": []}')
    with pytest.raises(spawnml.ModelLoadError, match="not a boolean or numeric type"):
        spawnml.load(exgraph([SWISH], ["s"], dtype="object"))


def test_operator_schema_infers_shapes_and_refuses_integer_inputs():
    types = spawnml.passes.infer_shapes(spawnml.load(MIXED))
    assert types["s"] == (np.float32, ("n", 4))
    assert types["y"].shape == ("n", 5)
    with pytest.raises(InvalidGraphError, match="Swish takes a floating-point tensor, not int64"):
        spawnml.passes.infer_shapes(spawnml.load(exgraph([SWISH], ["s"], dtype="int64")))


def test_mixed_providers_place_each_node_and_list_every_transfer():
    session = spawnml.InferenceSession(MIXED, providers=["example", "cpu"])
    assert session.placement() == [
        ("swish", "Swish", "example"),
        ("project", "MatMul", "cpu"),
        ("shift", "Add", "example"),
        ("softmax", "Softmax", "cpu"),
    ]
    assert session.transfers() == [
        Transfer("s", "example", "cpu", "project"),
        Transfer("m", "cpu", "example", "shift"),
        Transfer("a", "example", "cpu", "softmax"),
    ]
    for rows in (1, 3):
        y, logits = session.run(None, {"x": X[:rows]})
        want_y, want_logits = reference(X[:rows])
        # float32 against float64: a few roundings through swish, a 4-term dot product and exp
        np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(logits, want_logits, rtol=1e-5, atol=1e-5)


def test_outputs_stay_on_the_device_that_produced_them():
    session = spawnml.InferenceSession(MIXED, providers=["example", "cpu"])
    y, logits = session.run_with_tensors(None, {"x": X})
    assert (y.device, logits.device) == ("cpu", "example")
    assert isinstance(logits.buffer, ExampleBuffer) and logits.shape == (3, 5)


def test_standard_operators_give_the_cpu_backends_results():
    model = exgraph(
        [
            {"op": "Add", "inputs": ["x", "c"], "outputs": ["t"]},
            {"op": "Mul", "inputs": ["t", "x"], "outputs": ["y"]},
        ],
        ["y"],
    )
    on_example = spawnml.InferenceSession(model, providers=["example"])
    assert {provider for _, _, provider in on_example.placement()} == {"example"}
    (got,) = on_example.run(None, {"x": X})
    (want,) = spawnml.InferenceSession(model, providers=["cpu"]).run(None, {"x": X})
    np.testing.assert_array_equal(got, want)


def test_operators_the_backend_lacks_are_refused_at_load():
    with pytest.raises(UnsupportedOperatorError) as info:
        spawnml.InferenceSession(MIXED, providers=["example"])
    missing = {(op.op_type, op.reasons) for op in info.value.operators}
    reasons = ("example: no example kernel",)
    assert missing == {("MatMul", reasons), ("Softmax", reasons)}


def test_plugins_and_operators_commands_list_it(capsys):
    assert main(["plugins", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    backend = next(b for b in report["backends"] if b["name"] == "example")
    assert backend == {
        "name": "example",
        "available": True,
        "reason": "",
        "device": "example device (host memory)",
        "native_operators": 3,
    }
    assert {"name": "exgraph", "extensions": [".exgraph"]} in report["formats"]
    listed = next(p for p in report["plugins"] if p["name"] == "example")
    assert listed["distribution"] == "spawnml-example-plugin" and not listed["builtin"]
    assert main(["operators", "--json"]) == 0
    rows = {(row["domain"], row["op_type"]): row for row in json.loads(capsys.readouterr().out)}
    assert rows[("com.example", "Swish")]["backends"] == ["example"]
    assert {"cpu", "example"} <= set(rows[("ai.onnx", "Add")]["backends"])


def test_spawnml_plugins_leaves_it_out(monkeypatch, capsys):
    monkeypatch.setenv("SPAWNML_PLUGINS", "cpu,onnx")
    assert "example" not in plugins.registry().plugins
    assert "example" not in plugins.backends() and "exgraph" not in plugins.formats()
    assert plugins.operators().lookup("com.example", "Swish", 1) is None
    with pytest.raises(UnknownFormatError):
        spawnml.load(MIXED)
    with pytest.raises(
        BackendUnavailableError,
        match=r"provider 'example' is not loaded: spawnml-example-plugin \(plugin 'example'\) provides it",
    ):
        spawnml.InferenceSession(Graph(), providers=["example", "cpu"])
    assert main(["plugins", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {p["name"] for p in report["plugins"]} == {"spawnml.plugins.builtin", "cpu", "onnx"}


def test_spawnml_plugins_can_select_it_by_distribution_name(monkeypatch):
    monkeypatch.setenv("SPAWNML_PLUGINS", "spawnml-example-plugin")
    assert set(plugins.registry().plugins) == {"spawnml.plugins.builtin", "example"}
    assert set(plugins.backends()) == {"example"} and set(plugins.formats()) == {"exgraph"}


def test_plugin_module_registered_on_a_bare_manager_runs_a_model(monkeypatch):
    monkeypatch.setenv("SPAWNML_PLUGINS", "")  # no installed plugin loads, only core's built-ins
    plugins.get_plugin_manager().register(spawnml_example.plugin, name="example")
    plugins.refresh()
    model = exgraph([{**SWISH, "attrs": {"beta": 0.5}}], ["s"])
    session = spawnml.InferenceSession(model, providers=["example"])
    (got,) = session.run(None, {"x": X})
    want = X.astype(np.float64) / (1 + np.exp(-0.5 * X.astype(np.float64)))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
