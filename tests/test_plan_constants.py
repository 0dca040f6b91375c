"""Constant nodes are computed once, when the session is planned; every run still matches
onnxruntime, and what a caller is given stays its own. Exact comparisons (same float32 ops)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import spawnml
from onnx import TensorProto, helper, numpy_helper

NO_OPT = spawnml.SessionOptions(graph_optimization_level="disable")


def _constant(name: str, values: list[float]) -> helper.NodeProto:
    return helper.make_node(
        "Constant", [], [name], value=numpy_helper.from_array(np.array(values, np.float32))
    )


def _branch(name: str, values: list[float]) -> helper.GraphProto:
    """A subgraph (not optimized by passes) adding a Constant to the outer ``x``."""
    return helper.make_graph(
        [_constant(f"{name}_c", values), helper.make_node("Add", ["x", f"{name}_c"], [f"{name}_y"])],
        name,
        [],
        [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [3])],
    )


def _if_model() -> bytes:
    node = helper.make_node(
        "If", ["flag"], ["y"], then_branch=_branch("then", [1, 2, 3]), else_branch=_branch("else", [-1, 0, 5])
    )
    graph = helper.make_graph(
        [node],
        "branches",
        [
            helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8
    ).SerializeToString()


def test_constants_in_subgraphs_match_onnxruntime_on_every_run():
    model = _if_model()
    ours = spawnml.InferenceSession(model, NO_OPT, providers=["cpu"])
    reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for run in range(3):
        for flag in (True, False):
            feeds = {"flag": np.array(flag), "x": np.array([0.5, -1.5, float(run)], np.float32)}
            np.testing.assert_array_equal(ours.run(None, feeds)[0], reference.run(None, feeds)[0])


def test_a_constant_returned_as_an_output_is_the_callers_to_change():
    graph = helper.make_graph(
        [_constant("c", [4, 5, 6]), helper.make_node("Identity", ["x"], ["y"])],
        "returned",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [
            helper.make_tensor_value_info("c", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1]),
        ],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8
    ).SerializeToString()
    session = spawnml.InferenceSession(model, NO_OPT, providers=["cpu"])
    feeds = {"x": np.zeros(1, np.float32)}
    first, _ = session.run(None, feeds)
    first[:] = 0  # the caller's array: writable, and not the session's
    (expected, _) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_array_equal(session.run(None, feeds)[0], expected)
