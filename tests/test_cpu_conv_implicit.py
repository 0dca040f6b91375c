"""Float32 2-D convolutions as implicit GEMMs on the register tile (``conv_implicit``) against
onnxruntime, and the same bits on one and two threads.

Each case is one Conv or com.microsoft FusedConv node; the kernel is called directly, so that
the path under test is the one that runs (each case checks that it took it). Tolerances: rtol
1e-4 / atol 1e-4, float32 sums of up to a few thousand products in another order.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from spawnml_cpu.kernels import conv, conv_implicit, loops, tiles

MS = "com.microsoft"
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}

#: (input shape, weight shape, attributes): kernel sizes, strides, dilations, groups and pads the
#: one table of offsets has to place; output rows narrower than a tile (bands moved back to end
#: at the last row); channel counts that move the last tile of rows back.
CASES = {
    "3x3": ((1, 16, 20, 24), (32, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    "3x3-few-outputs": ((2, 8, 33, 31), (7, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    "3x3-stride2-odd": ((1, 5, 37, 41), (16, 5, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "5x5-strides-2-3-asymmetric-grouped": (
        (2, 32, 20, 30),
        (64, 8, 5, 5),
        {"group": 4, "strides": [2, 3], "pads": [2, 1, 0, 2]},
    ),
    "3x3-dilated": ((1, 12, 25, 30), (24, 12, 3, 3), {"dilations": [2, 3], "pads": [2, 3, 2, 3]}),
    "7x7-stride2": ((1, 3, 45, 50), (10, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    "1x1-stride2": ((1, 9, 30, 31), (13, 9, 1, 1), {"strides": [2, 2]}),
    "1x9-wide": ((1, 4, 9, 70), (6, 4, 1, 9), {"pads": [0, 4, 0, 4]}),
    "pads-past-the-kernel": ((1, 4, 8, 9), (6, 4, 3, 3), {"pads": [4, 0, 2, 5]}),
    "few-output-rows": ((1, 64, 4, 12), (48, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    "same-upper": ((1, 5, 21, 20), (7, 5, 4, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "1d": ((1, 64, 5000), (10, 64, 5), {"strides": [2], "pads": [2, 1]}),
    # One group of fewer outputs than a tile's rows: the weights padded with zero rows.
    "3x3-one-output": ((1, 8, 30, 40), (1, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    "5x5-three-outputs-strided": ((2, 4, 25, 26), (3, 4, 5, 5), {"strides": [2, 2], "pads": [2, 2, 2, 2]}),
    # Images of a batch go through the products together, their rows one after another.
    "batch-of-one-row-images": ((16, 8, 1, 21), (20, 8, 1, 5), {"pads": [0, 2, 0, 2]}),
    "batch-strided-grouped": (
        (3, 12, 9, 11),
        (12, 6, 3, 3),
        {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]},
    ),
    "batch-3x3": ((5, 16, 6, 7), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
}


def _reference(op: str, x: np.ndarray, w: np.ndarray, b: np.ndarray, z: np.ndarray | None, attrs: dict):
    names = ["x", "w", "b"] + (["z"] if z is not None else [])
    node = helper.make_node(op, names, ["y"], domain=MS if op == "FusedConv" else "", **attrs)
    initializers = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)]
    if z is not None:
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, z.shape))
    graph = helper.make_graph(
        [node], "conv", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x} | ({} if z is None else {"z": z}))[0]


def _operands(x_shape, w_shape, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32)
    return x, w, rng.standard_normal(w_shape[0]).astype(np.float32)


@pytest.fixture
def gathered_calls(monkeypatch) -> list[int]:
    """The output channels of each call of the implicit GEMM."""
    calls: list[int] = []
    gathered = tiles.gathered
    monkeypatch.setattr(tiles, "gathered", lambda w, *args: calls.append(len(w)) or gathered(w, *args))
    return calls


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_matches_onnxruntime(name, gathered_calls):
    x_shape, w_shape, attrs = CASES[name]
    x, w, b = _operands(x_shape, w_shape)
    np.testing.assert_allclose(
        conv.convolve(attrs, x, w, b), _reference("Conv", x, w, b, None, attrs), **TOLERANCE
    )
    assert gathered_calls


@pytest.mark.parametrize(
    "name",
    [
        "3x3",
        "3x3-stride2-odd",
        "5x5-strides-2-3-asymmetric-grouped",
        "batch-strided-grouped",
        "3x3-one-output",
    ],
)
def test_fused_conv_with_residual_and_activation_matches_onnxruntime(name, gathered_calls):
    """Bias, residual, clamp and then an activation, applied per band as the sums are cropped."""
    x_shape, w_shape, attrs = CASES[name]
    x, w, b = _operands(x_shape, w_shape, seed=1)
    expected = _reference("Conv", x, w, b, None, attrs)
    z = np.random.default_rng(2).standard_normal(expected.shape).astype(np.float32)
    fused = {**attrs, "activation": "Clip", "activation_params": [-1.0, 2.0]}
    got = conv.convolve(attrs, x, w, b, (-1.0, 2.0), z)
    np.testing.assert_allclose(got, _reference("FusedConv", x, w, b, z, fused), **TOLERANCE)
    sigmoid = conv.convolve(attrs, x, w, b, None, z, (loops.SIGMOID, 0.0, 0.0))
    fused = {**attrs, "activation": "Sigmoid"}
    np.testing.assert_allclose(sigmoid, _reference("FusedConv", x, w, b, z, fused), **TOLERANCE)
    assert gathered_calls


#: Cut over two threads: by spans of output rows, and by spans of output channels where the rows
#: are too few for more than one span.
SPLIT_CASES = {
    "rows": ((1, 32, 64, 60), (40, 32, 3, 3), {"pads": [1, 1, 1, 1]}),
    "channels": ((1, 256, 6, 12), (256, 256, 3, 3), {"pads": [1, 1, 1, 1]}),
    "grouped-channels": ((1, 128, 5, 14), (192, 32, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    "batch-rows": ((6, 32, 12, 30), (24, 32, 3, 3), {"strides": [1, 2], "pads": [1, 1, 1, 1]}),
}


@pytest.mark.parametrize("name", sorted(SPLIT_CASES))
def test_same_bits_on_one_and_two_threads(name, gathered_calls):
    """Every output is summed by the same code in the same order whichever span computes it; equal
    weight rows give equal channels of a group (tiles moved back to end at the edge compute some
    twice)."""
    x_shape, w_shape, attrs = SPLIT_CASES[name]
    x, w, b = _operands(x_shape, w_shape, seed=3)
    w[:] = w[:1]
    b[:] = b[0]
    windows = conv.Windows.of(attrs, x.shape[2:], w.shape[2:])
    group = attrs.get("group", 1)
    weights = np.ascontiguousarray(w.reshape(group, w.shape[0] // group, -1))
    answers = []
    for threads in (1, 2):
        y = np.full((len(x), w.shape[0], *windows.out), np.nan, np.float32)
        low, high = conv._unbounded(y.dtype)
        conv_implicit.convolve(windows, x, weights, b, low, high, None, y, threads, loops.NO_ACTIVATION)
        per_group = y.reshape(len(x), group, -1, *windows.out)
        assert (per_group == per_group[:, :, :1]).all()
        answers.append(y)
    np.testing.assert_array_equal(*answers)
    np.testing.assert_allclose(answers[0], _reference("Conv", x, w, b, None, attrs), **TOLERANCE)
    assert len(gathered_calls) > group  # the two-thread run was cut
