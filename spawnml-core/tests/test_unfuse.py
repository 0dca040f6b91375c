"""Fused elementwise chains written to ONNX come back as standard nodes onnxruntime runs."""

from __future__ import annotations

import numpy as np
import onnxruntime
import spawnml
from onnx import TensorProto, helper


def test_optimized_graph_saved_as_onnx_runs_in_onnxruntime(tmp_path):
    nodes = [
        helper.make_node("Mul", ["a", "b"], ["m"]),
        helper.make_node("Add", ["m", "c"], ["y"]),
        helper.make_node("Sigmoid", ["y"], ["s"]),
        helper.make_node("Mul", ["y", "s"], ["out"]),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in "abc"]
    output = helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])
    model = helper.make_model(
        helper.make_graph(nodes, "chain", inputs, [output]), opset_imports=[helper.make_opsetid("", 17)]
    )
    source, saved = tmp_path / "chain.onnx", tmp_path / "optimized.onnx"
    source.write_bytes(model.SerializeToString())
    options = spawnml.SessionOptions(optimized_model_filepath=saved)
    session = spawnml.InferenceSession(source, options, providers=["cpu"])
    assert [op for _, op, _ in session.placement()] == ["FusedElementwise"]
    feeds = {
        n: np.random.default_rng(i).standard_normal((2, 3)).astype(np.float32) for i, n in enumerate("abc")
    }
    reference = onnxruntime.InferenceSession(saved, providers=["CPUExecutionProvider"])
    assert [node.op_type for node in spawnml.load(saved).nodes] == ["Mul", "Add", "Sigmoid", "Mul"]
    np.testing.assert_allclose(
        reference.run(None, feeds)[0], session.run(None, feeds)[0], rtol=1e-6, atol=1e-7
    )
