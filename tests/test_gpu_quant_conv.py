"""ConvInteger and QLinearConv on every GPU backend against onnxruntime: groups, strides, dilations,
padding, 1-D to 3-D, per-tensor and per-channel zero points and scales, with and without bias.

Each case is a one-node ONNX model run whole on the GPU provider (its placement is checked) and
on onnxruntime's CPU provider. Outputs must be equal exactly: ConvInteger's int32 sums, and
QLinearConv's requantized values (the same float32 multiplier, rounded half to even).
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import spawnml
from onnx import helper, numpy_helper

from tests.backends import GPU_BACKENDS, backend_or_skip
from tests.ort_int8 import int8_weights

rng = np.random.default_rng(11)


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def run_both(
    provider: str, op: str, x: np.ndarray, constants: dict, **attrs
) -> tuple[np.ndarray, np.ndarray]:
    """The output of a one-node model on the GPU and on onnxruntime (``x`` fed, the rest initializers)."""
    node = helper.make_node(op, ["x", *constants], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        op,
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, n) for n, v in constants.items()],
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    data = onnx_model.SerializeToString()
    session = spawnml.InferenceSession(data, providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    (got,) = session.run(None, {"x": x})
    (want,) = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    return got, want


def u8(*shape: int) -> np.ndarray:
    return rng.integers(0, 256, shape).astype(np.uint8)


# (x shape, w shape, attributes)
CONVS = [
    ((1, 3, 9, 11), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 8, 8), (6, 2, 3, 2), {"group": 2, "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 6, 7, 7), (6, 1, 3, 3), {"group": 6, "auto_pad": "SAME_UPPER"}),
    ((2, 3, 20), (5, 3, 4), {"strides": [3], "pads": [2, 1]}),
    ((1, 2, 4, 5, 6), (3, 2, 2, 3, 2), {}),
]


@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), CONVS, ids=[str(i) for i in range(len(CONVS))])
def test_conv_integer(provider: str, x_shape: tuple, w_shape: tuple, attrs: dict) -> None:
    constants = {
        "w": u8(*w_shape),
        "x_zero_point": np.array(131, np.uint8),
        "w_zero_point": np.array(97, np.uint8),
    }
    got, want = run_both(provider, "ConvInteger", u8(*x_shape), constants, **attrs)
    np.testing.assert_array_equal(got, want)


def test_conv_integer_without_zero_points(provider: str) -> None:
    got, want = run_both(provider, "ConvInteger", u8(1, 2, 6, 6), {"w": u8(3, 2, 3, 3)})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("signed", [False, True], ids=["uint8", "int8"])
@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), CONVS[:4], ids=[str(i) for i in range(4)])
def test_qlinear_conv(provider: str, x_shape: tuple, w_shape: tuple, attrs: dict, signed: bool) -> None:
    kind = np.int8 if signed else np.uint8
    low, high = (-128, 128) if signed else (0, 256)
    out_channels = w_shape[0]
    constants = {
        "x_scale": np.array(0.02, np.float32),
        "x_zero_point": np.array(-3 if signed else 120, kind),
        "w": int8_weights(rng, w_shape),
        "w_scale": rng.uniform(0.002, 0.01, out_channels).astype(np.float32),  # per output channel
        "w_zero_point": np.zeros(out_channels, np.int8),
        "y_scale": np.array(0.05, np.float32),
        "y_zero_point": np.array(5 if signed else 128, kind),
        "bias": rng.integers(-2000, 2000, out_channels).astype(np.int32),
    }
    x = rng.integers(low, high, x_shape).astype(kind)
    got, want = run_both(provider, "QLinearConv", x, constants, **attrs)
    np.testing.assert_array_equal(got, want)
