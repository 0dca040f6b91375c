"""The CPU's float32 Softmax row loop against onnxruntime.

Softmax over the last axis of a float32 input runs on a compiled loop (exp by a polynomial, so
that it vectorizes), each row shifted by its own maximum (found in one pass with the check for
NaN and +inf, where numpy's path runs instead). The cases cover MiniLM's attention scores (12
heads of 128 x 128), masked keys, rows as wide as one element or not a multiple of the vector
width, spans on either side of 80, rows of only -inf, NaN (with and without the sign bit) and
+inf, and the opset-11 form (the trailing axes as one row). Each case is one node run
unoptimized. Tolerances: within rtol 1e-5 / atol 1e-7 of onnxruntime (its exp and sums round
differently); NaN exactly where onnxruntime gives NaN.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import spawnml
from onnx import TensorProto, helper

LOWEST = np.finfo(np.float32).min


def _model(shape: tuple[int, ...], axis: int, opset: int) -> bytes:
    node = helper.make_node("Softmax", ["x"], ["y"], axis=axis)
    graph = helper.make_graph(
        [node],
        "softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    return model.SerializeToString()


def _both(x: np.ndarray, axis: int = -1, opset: int = 17) -> tuple[np.ndarray, np.ndarray]:
    model = _model(x.shape, axis, opset)
    options = spawnml.SessionOptions(graph_optimization_level="disable")
    (ours,) = spawnml.InferenceSession(model, options, providers=["cpu"]).run(None, {"x": x})
    (want,) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    return ours, want


def _scores(shape: tuple[int, ...], scale: float, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _masked(fill: float) -> np.ndarray:
    """MiniLM's scores with the last keys of each batch item masked by ``fill`` (a padded batch)."""
    x = _scores((2, 12, 128, 128), 3)
    x[0, :, :, 100:] = fill
    x[1, :, :, 37:] = fill
    return x


CASES = {
    "minilm-heads": lambda: _scores((1, 12, 128, 128), 3),
    "minilm-masked-lowest": lambda: _masked(LOWEST),
    "minilm-masked-inf": lambda: _masked(-np.inf),
    "span-just-under-80": lambda: np.linspace(-39.9, 39.9, 6 * 33, dtype=np.float32).reshape(6, 33),
    "span-over-80": lambda: _scores((5, 77), 30),
    "large-values": lambda: _scores((3, 40), 1e4),
    "one-element-rows": lambda: _scores((7, 1), 5),
    "odd-width": lambda: _scores((4, 3, 19), 2),
    "one-row": lambda: _scores((1000,), 4),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_softmax_matches_onnxruntime(case: str) -> None:
    ours, want = _both(CASES[case]())
    np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-7)


def test_softmax_opset_11_rows_of_the_trailing_axes() -> None:
    ours, want = _both(_scores((2, 3, 4, 5), 3), axis=1, opset=11)
    np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("special", [np.nan, -np.nan, np.inf], ids=["nan", "nan-sign-bit", "inf"])
def test_softmax_nan_and_infinity_as_onnxruntime(special: float) -> None:
    x = _scores((4, 16), 2)
    x[1, 3] = special
    ours, want = _both(x)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(want))
    np.testing.assert_allclose(ours[[0, 2, 3]], want[[0, 2, 3]], rtol=1e-5, atol=1e-7)


def test_softmax_row_of_only_minus_infinity_as_onnxruntime() -> None:
    x = _scores((3, 16), 2)
    x[1] = -np.inf
    x[2, :5] = -np.inf
    ours, want = _both(x)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(want))
    np.testing.assert_allclose(ours[[0, 2]], want[[0, 2]], rtol=1e-5, atol=1e-7)
