"""Operators that tools write and SpawnML does not run are refused at load, naming the tool."""

from __future__ import annotations

import pytest
import spawnml
from onnx import TensorProto, helper
from spawnml.errors import UnsupportedOperatorError


def one_microsoft_node(op_type: str) -> bytes:
    graph = helper.make_graph(
        [helper.make_node(op_type, ["x"], ["y"], domain="com.microsoft")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


@pytest.mark.parametrize(
    ("op_type", "tool"),
    [
        ("SparseAttention", "onnxruntime-genai's model builder"),
        ("BiasSplitGelu", "for Stable Diffusion models"),
        ("BeamSearch", "convert_generation"),
    ],
)
def test_refusal_names_the_operator_and_the_tool_that_writes_it(op_type, tool):
    with pytest.raises(UnsupportedOperatorError) as refused:
        spawnml.InferenceSession(one_microsoft_node(op_type))
    assert f"com.microsoft::{op_type}" in str(refused.value) and tool in str(refused.value)


def test_an_operator_of_no_known_tool_says_only_that_it_has_no_schema():
    graph = helper.make_graph(
        [helper.make_node("Thing", ["x"], ["y"], domain="org.nowhere")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("org.nowhere", 1)]
    model = helper.make_model(graph, opset_imports=opsets).SerializeToString()
    with pytest.raises(
        UnsupportedOperatorError, match=r"org\.nowhere::Thing .*no operator schema registered$"
    ):
        spawnml.InferenceSession(model)
