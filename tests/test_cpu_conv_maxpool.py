"""MaxPool on the CPU's compiled loop (1-D and 2-D, float32 and float64, no indices) against
onnxruntime: exactly equal, as a maximum rounds nothing.

Each case is one MaxPool node run unoptimized; the cases cover pads (past the kernel too),
strides, dilations, ceil_mode's last windows past the input, SAME padding, NaN, and planes
enough to be cut over two threads.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import spawnml
from onnx import TensorProto, helper

#: (input shape, attributes)
CASES = {
    "2x2-stride2": ((1, 8, 16, 17), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    "5x5-same-size": ((2, 4, 10, 10), {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),
    "3x3-stride2-pads": ((1, 3, 15, 12), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 1]}),
    "ceil-mode": ((1, 2, 9, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    "dilated": ((1, 2, 12, 13), {"kernel_shape": [2, 3], "dilations": [2, 2], "pads": [1, 2, 1, 2]}),
    "same-upper": ((1, 3, 7, 8), {"kernel_shape": [2, 3], "strides": [2, 1], "auto_pad": "SAME_UPPER"}),
    "1x2-stride-1x2": ((1, 6, 30, 40), {"kernel_shape": [1, 2], "strides": [1, 2]}),
    "1d": ((2, 5, 33), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    "many-planes": ((2, 64, 120, 100), {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
}


def _model(x_shape, attrs: dict, elem: int) -> bytes:
    node = helper.make_node("MaxPool", ["x"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "pool",
        [helper.make_tensor_value_info("x", elem, x_shape)],
        [helper.make_tensor_value_info("y", elem, None)],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=8
    ).SerializeToString()


def _run_both(model: bytes, x: np.ndarray, threads: int = 0) -> tuple[np.ndarray, np.ndarray]:
    options = spawnml.SessionOptions(graph_optimization_level="disable", intra_op_num_threads=threads)
    (ours,) = spawnml.InferenceSession(model, options, providers=["cpu"]).run(None, {"x": x})
    reference_options = ort.SessionOptions()
    reference_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model, reference_options, providers=["CPUExecutionProvider"])
    (reference,) = session.run(None, {"x": x})
    return ours, reference


@pytest.fixture
def compiled_calls(monkeypatch) -> list[int]:
    """The spans of planes the compiled loop ran."""
    from spawnml_cpu.kernels import pool

    calls: list[int] = []
    loop = pool._compiled(False)
    monkeypatch.setattr(
        pool, "_compiled", lambda with_indices: lambda *args: calls.append(args[-2]) or loop(*args)
    )
    return calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_max_pool_equals_onnxruntime(name, dtype, compiled_calls):
    x_shape, attrs = CASES[name]
    x = np.random.default_rng(0).standard_normal(x_shape).astype(dtype)
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    ours, reference = _run_both(_model(x_shape, attrs, elem), x)
    np.testing.assert_array_equal(ours, reference)
    assert compiled_calls


def test_nan_wins_its_windows(compiled_calls):
    """A NaN makes every window it falls in NaN, as in numpy's maximum, wherever it lies in it."""
    x = np.random.default_rng(1).standard_normal((1, 1, 6, 6)).astype(np.float32)
    x[0, 0, 2, 3] = np.nan
    model = _model(x.shape, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, TensorProto.FLOAT)
    options = spawnml.SessionOptions(graph_optimization_level="disable")
    (ours,) = spawnml.InferenceSession(model, options, providers=["cpu"]).run(None, {"x": x})
    padded = np.pad(x[0, 0], 1, constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3))
    expected = np.maximum.reduce(windows.reshape(6, 6, 9), axis=2)
    np.testing.assert_array_equal(ours[0, 0], expected)
    assert np.isnan(ours[0, 0, 1:4, 2:5]).all() and np.isnan(ours).sum() == 9
    assert compiled_calls


def test_large_pools_are_cut_over_two_threads(compiled_calls):
    x_shape, attrs = CASES["many-planes"]
    x = np.random.default_rng(2).standard_normal(x_shape).astype(np.float32)
    ours, reference = _run_both(_model(x_shape, attrs, TensorProto.FLOAT), x, threads=2)
    np.testing.assert_array_equal(ours, reference)
    assert len(compiled_calls) > 1
