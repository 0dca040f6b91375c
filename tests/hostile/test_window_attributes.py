"""Convolution and pooling nodes with zero or negative strides, dilations or kernels are refused
at load with an InvalidGraphError naming them (their schema's shape inference), never a
ZeroDivisionError from the window arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper

from .onnx_files import model


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("Conv", {"strides": [0, 1]}),
        ("Conv", {"dilations": [1, -2]}),
        ("MaxPool", {"kernel_shape": [2, 2], "strides": [1, 0]}),
        ("AveragePool", {"kernel_shape": [0, 2]}),
    ],
)
def test_non_positive_window_attributes_are_refused(tmp_path, op, attrs):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inputs, initializers = ["x"], []
    if op == "Conv":
        inputs.append("w")
        initializers.append(numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w"))
    path = tmp_path / "model.onnx"
    node = helper.make_node(op, inputs, ["y"], name="window", **attrs)
    path.write_bytes(model([node], [x], [y], initializers).SerializeToString())
    with pytest.raises(
        spawnml.InvalidGraphError, match=rf"node 'window' \(ai.onnx::{op}\): .*must all be positive"
    ):
        spawnml.InferenceSession(path, providers=["cpu"])
