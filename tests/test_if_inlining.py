"""If nodes with a constant condition are inlined at load; results checked against onnxruntime.

The models reuse names across the branches and the enclosing graph (initializers and node
outputs, the branch outputs named as an output of the enclosing graph) and nest a second If
whose condition becomes constant only after the first is inlined, so renaming and rewiring are
exercised.
onnxruntime runs the original file; outputs must be equal (the same float32 operations).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper

X = np.array([[1.5, -2.0, 0.25], [3.0, 0.5, -1.0]], np.float32)


def branch(
    name: str, nodes: list[onnx.NodeProto], output: str, **initializers: np.ndarray
) -> onnx.GraphProto:
    return helper.make_graph(
        nodes,
        name,
        [],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
        [numpy_helper.from_array(value, key) for key, value in initializers.items()],
    )


def model(condition: bool | None, flag: bool = True) -> onnx.ModelProto:
    """``y = If(cond)``: then ``relu(t * c)`` or ``relu(-t)`` by an inner If on ``flag``, where
    ``t = x + c`` and ``c`` is the branch's own; else ``x``. ``z = x * c`` with the outer ``c``.
    ``cond`` is a graph input when ``condition`` is None."""
    inner = helper.make_node(
        "If",
        ["flag"],
        ["scaled"],
        then_branch=branch("inner_then", [helper.make_node("Mul", ["t", "c"], ["out"])], "out"),
        else_branch=branch("inner_else", [helper.make_node("Neg", ["t"], ["out"])], "out"),
    )
    then_branch = branch(
        "then",
        [helper.make_node("Add", ["x", "c"], ["t"]), inner, helper.make_node("Relu", ["scaled"], ["z"])],
        "z",
        c=np.array([10.0, 20.0, 30.0], np.float32),
    )
    else_branch = branch("else", [helper.make_node("Identity", ["x"], ["z"])], "z")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])]
    initializers = [
        numpy_helper.from_array(np.array([2.0, -1.0, 0.5], np.float32), "c"),
        numpy_helper.from_array(np.array(flag), "flag"),
    ]
    if condition is None:
        inputs.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    else:
        initializers.append(numpy_helper.from_array(np.array(condition), "cond"))
    graph = helper.make_graph(
        [
            helper.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch),
            helper.make_node("Mul", ["x", "c"], ["z"]),
        ],
        "constant_if",
        inputs,
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "z")],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def save(proto: onnx.ModelProto, path: Path) -> str:
    onnx.save(proto, path)
    return str(path)


def reference(path: str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize(("condition", "flag"), [(True, True), (True, False), (False, True)])
def test_constant_condition_is_inlined_and_matches_onnxruntime(tmp_path, condition, flag):
    path = save(model(condition, flag), tmp_path / "model.onnx")
    session = spawnml.InferenceSession(path, providers=["cpu"])
    assert "If" not in {op for _, op, _ in session.placement()}
    got = session.run(None, {"x": X})
    for have, want in zip(got, reference(path, {"x": X}), strict=True):
        np.testing.assert_array_equal(have, want)


def test_a_fed_condition_keeps_the_if(tmp_path):
    path = save(model(None), tmp_path / "model.onnx")
    session = spawnml.InferenceSession(path, providers=["cpu"])
    assert "If" in {op for _, op, _ in session.placement()}
    for condition in (True, False):
        feeds = {"x": X, "cond": np.array(condition)}
        for have, want in zip(session.run(None, feeds), reference(path, feeds), strict=True):
            np.testing.assert_array_equal(have, want)


def test_a_branch_with_the_wrong_number_of_outputs_is_refused_at_load(tmp_path):
    """As onnxruntime refuses it, with the node, the branch and the counts named."""
    proto = model(True)
    (then_branch,) = [
        attribute.g for attribute in proto.graph.node[0].attribute if attribute.name == "then_branch"
    ]
    then_branch.output.append(helper.make_tensor_value_info("t", TensorProto.FLOAT, None))
    path = save(proto, tmp_path / "model.onnx")
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.Fail, match="different number of outputs"):
        onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    with pytest.raises(
        spawnml.InvalidGraphError, match=r"has 1 outputs but its then_branch.*returns 2 values"
    ):
        spawnml.InferenceSession(path, providers=["cpu"])
