"""Binarizer and ArrayFeatureExtractor (ai.onnx.ml) on every GPU backend against onnxruntime.

Each case is a one-node ONNX model run whole on the GPU provider (its placement is checked) and
on onnxruntime's CPU provider (int64 and float64 Binarizer, which onnxruntime lacks, on ONNX's
reference evaluator); outputs must be equal exactly (comparisons and copies).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.backends import GPU_BACKENDS, backend_or_skip

rng = np.random.default_rng(5)


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def ml_model(op: str, x: np.ndarray, constants: dict | None = None, **attrs) -> bytes:
    constants = constants or {}
    node = helper.make_node(op, ["x", *constants], ["y"], domain="ai.onnx.ml", **attrs)
    graph = helper.make_graph(
        [node],
        op,
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, n) for n, v in constants.items()],
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 3)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()


def compare(provider: str, onnx_model: bytes, x: np.ndarray) -> None:
    session = spawnml.InferenceSession(onnx_model, providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    (got,) = session.run(None, {"x": x})
    (want,) = onnxruntime.InferenceSession(onnx_model, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threshold", [0.0, 0.3, -1.25])
def test_binarizer(provider: str, threshold: float) -> None:
    x = rng.standard_normal((4, 33)).astype(np.float32)
    x[0, :3] = threshold  # equal to the threshold: not above it
    compare(provider, ml_model("Binarizer", x, threshold=threshold), x)


@pytest.mark.parametrize(
    ("dtype", "threshold"), [(np.int64, 2.5), (np.int64, -3.0), (np.int64, 1e10), (np.float64, 0.1)]
)
def test_binarizer_int64_and_float64(provider: str, dtype: type, threshold: float) -> None:
    """onnxruntime's Binarizer takes float32 only: int64 and float64 are checked against ONNX's
    reference."""
    x = (rng.integers(-6, 7, (3, 20)) / (10 if dtype == np.float64 else 1)).astype(dtype)
    onnx_model = ml_model("Binarizer", x, threshold=threshold)
    (got,) = spawnml.InferenceSession(onnx_model, providers=[provider]).run(None, {"x": x})
    (want,) = ReferenceEvaluator(onnx.load_from_string(onnx_model)).run(None, {"x": x})
    assert got.dtype == want.dtype == dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("x", "indices"),
    [
        (rng.standard_normal((3, 4, 10)).astype(np.float32), np.array([9, 0, 4, 4], np.int64)),
        (rng.integers(-50, 50, (5, 7)).astype(np.int64), np.array([[6], [2]], np.int64)),
        (rng.standard_normal(8).astype(np.float32), np.array([1, 7], np.int64)),
        (rng.standard_normal((4, 6)), np.array([5, 1], np.int64)),
    ],
    ids=["float32-3d", "int64-2d", "vector", "float64"],
)
def test_array_feature_extractor(provider: str, x: np.ndarray, indices: np.ndarray) -> None:
    compare(provider, ml_model("ArrayFeatureExtractor", x, {"indices": indices}), x)


def test_array_feature_extractor_refuses_indices_out_of_range(provider: str) -> None:
    x = np.ones((2, 3), np.float32)
    session = spawnml.InferenceSession(
        ml_model("ArrayFeatureExtractor", x, {"indices": np.array([3], np.int64)}), providers=[provider]
    )
    with pytest.raises(spawnml.SpawnMLError, match=r"indices \[3\] must be non-empty and in \[0, 3\)"):
        session.run(None, {"x": x})
