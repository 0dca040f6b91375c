"""Per-tensor QuantizeLinear and DequantizeLinear of 8-bit integers (the compiled pass and the
table lookup) against onnxruntime, exactly: values at and between the rounding boundaries, past
the saturation bounds, zeros and infinities."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(5)
TYPES = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def run_both(node: str, x: np.ndarray, scale: float, zero: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``node`` of ``x`` in SpawnML's CPU backend and in onnxruntime."""
    out_type = TensorProto.FLOAT if node == "DequantizeLinear" else TYPES[zero.dtype.type]
    in_type = TYPES[zero.dtype.type] if node == "DequantizeLinear" else TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node(node, ["x", "scale", "zero"], ["y"])],
        "q",
        [helper.make_tensor_value_info("x", in_type, list(x.shape))],
        [helper.make_tensor_value_info("y", out_type, list(x.shape))],
        [numpy_helper.from_array(np.float32(scale), "scale"), numpy_helper.from_array(zero, "zero")],
    )
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    ours = np.asarray(spawnml.InferenceSession(data, providers=["cpu"]).run(None, {"x": x})[0])
    theirs = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    return ours, theirs


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_quantize_rounds_and_saturates_as_onnxruntime(dtype):
    scale = 0.037
    steps = np.arange(-300, 300, 0.25, dtype=np.float32)  # halves: ties rounded to even
    x = np.concatenate([steps * np.float32(scale), RNG.standard_normal(997).astype(np.float32) * 4])
    x = np.concatenate([x, np.array([0.0, -0.0, np.inf, -np.inf, 1e30, -1e30], np.float32)])
    zero = np.array(3 if dtype == np.uint8 else -2, dtype)
    ours, theirs = run_both("QuantizeLinear", x.reshape(1, -1), scale, zero)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_dequantize_every_value_as_onnxruntime(dtype):
    info = np.iinfo(dtype)
    x = np.arange(info.min, info.max + 1).astype(dtype).reshape(4, 64)
    zero = np.array(130 if dtype == np.uint8 else -7, dtype)
    ours, theirs = run_both("DequantizeLinear", x, 0.0123, zero)
    assert ours.dtype == theirs.dtype == np.float32
    np.testing.assert_array_equal(ours, theirs)
