"""The ONNX writer: IR graphs written back are valid ONNX that loads to the same IR and runs alike."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx.backend.test.loader import load_model_tests
from spawnml.conformance.onnx_cases import normalize
from spawnml.errors import SpawnMLError
from spawnml.passes import optimize
from spawnml.plugins import operators
from spawnml.session import resolve_providers
from spawnml_formats.onnx.writer import save_model, to_model
from spawnml_models.reference_models import REFERENCE_MODELS, minilm_feeds

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    NODE_TESTS = {test.name: test for test in load_model_tests(kind="node")}

#: Node tests with subgraphs, sequences, optionals and typed attributes, also run in onnxruntime.
RUN_IN_ONNXRUNTIME = (
    "test_if",
    "test_if_seq",
    "test_if_opt",
    "test_loop11",
    "test_loop16_seq_none",
    "test_scan9_sum",
    "test_sequence_map_add_2_sequences",
    "test_constant",
    "test_einsum_batch_diagonal",
    "test_resize_upsample_scales_linear",
)


def _same_graph(ours: spawnml.ir.Graph, theirs: spawnml.ir.Graph) -> None:
    assert [(n.op_type, n.domain, n.inputs, n.outputs) for n in ours.nodes] == [
        (n.op_type, n.domain, n.inputs, n.outputs) for n in theirs.nodes
    ]
    assert ours.inputs == theirs.inputs and ours.outputs == theirs.outputs
    assert ours.opset_imports == theirs.opset_imports
    assert sorted(ours.initializers) == sorted(theirs.initializers)
    for name, array in ours.initializers.items():
        np.testing.assert_array_equal(array, theirs.initializers[name])
    for ours_node, theirs_node in zip(ours.nodes, theirs.nodes, strict=True):
        assert sorted(ours_node.attrs) == sorted(theirs_node.attrs)


def test_every_node_test_model_round_trips_through_the_ir():
    """Every node test model that loads is written back as a valid model that loads the same."""
    ops = operators()
    written = 0
    for name, test in NODE_TESTS.items():
        try:
            graph = spawnml.load(test.model.SerializeToString())
        except SpawnMLError:
            continue
        model = to_model(graph, ops)
        onnx.checker.check_model(model)
        _same_graph(spawnml.load(model.SerializeToString()), graph)
        written += 1
        assert name
    assert written > 1500


@pytest.mark.parametrize("name", RUN_IN_ONNXRUNTIME)
def test_written_node_models_run_in_onnxruntime_like_the_originals(name):
    test = NODE_TESTS[name]
    original = test.model.SerializeToString()
    written = to_model(spawnml.load(original), operators()).SerializeToString()
    sessions = [
        onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]) for data in (original, written)
    ]
    names = [arg.name for arg in sessions[0].get_inputs()]
    for inputs, _ in test.data_sets:
        feeds = dict(zip(names, map(normalize, inputs), strict=False))
        want, got = (session.run(None, feeds) for session in sessions)
        for theirs, ours in zip(want, got, strict=True):
            np.testing.assert_equal(ours, theirs)


def test_symbolic_dims_unknown_dims_and_metadata_are_kept():
    graph = spawnml.load(NODE_TESTS["test_relu"].model.SerializeToString())
    graph.inputs[0].shape = ("batch", None, 5)
    graph.metadata.update({"producer_name": "spawnml-test", "model_version": "3", "note": "kept"})
    model = to_model(graph)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert [dim.WhichOneof("value") for dim in dims] == ["dim_param", None, "dim_value"]
    assert (model.producer_name, model.model_version) == ("spawnml-test", 3)
    assert {prop.key: prop.value for prop in model.metadata_props} == {"note": "kept"}


@pytest.mark.real_model
@pytest.mark.parametrize("level", ["disable", "all"])
def test_minilm_written_back_runs_in_onnxruntime_like_the_file(level, tmp_path):
    """MiniLM, optimized or not, saved and run by onnxruntime: same outputs within 1e-4."""
    from tests.model_files import require

    model = next(model for model in REFERENCE_MODELS if model.name.startswith("minilm"))
    path = require(model.path)
    graph = optimize(spawnml.load(path), level, resolve_providers(["cpu"]))
    target = tmp_path / "minilm.onnx"
    save_model(graph, target, operators())
    onnx.checker.check_model(str(target))
    original = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    written = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    for feeds in minilm_feeds():
        for ours, theirs in zip(written.run(None, feeds), original.run(None, feeds), strict=True):
            np.testing.assert_allclose(ours, theirs, rtol=model.rtol, atol=model.atol)
