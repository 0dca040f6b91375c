"""The CPU's float32 LayerNormalization row loop (the one the skip normalizations use) against
onnxruntime.

A float32 LayerNormalization whose scale and bias hold one value per element of the normalized
row runs on the compiled row loop; a scale or bias that broadcasts along the row, and other types,
keep numpy's path. The cases: MiniLM's embedding normalization (128 x 384, epsilon 1e-12), no
bias, normalization over the two trailing axes, a scale with leading 1s, a broadcast scale, and a
row of equal values (zero deviation). Each is one node run unoptimized, with all three outputs.
Tolerances: within rtol / atol 1e-5 of onnxruntime (sums in another order).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import spawnml
from onnx import TensorProto, helper


def _model(shapes: dict[str, tuple[int, ...]], axis: int, epsilon: float) -> bytes:
    inputs = [name for name in ("x", "scale", "bias") if name in shapes]
    node = helper.make_node(
        "LayerNormalization", inputs, ["y", "mean", "inv_std"], axis=axis, epsilon=epsilon
    )
    graph = helper.make_graph(
        [node],
        "layer_norm",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shapes[name]) for name in inputs],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "mean", "inv_std")],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8
    ).SerializeToString()


CASES = {
    "minilm-embeddings": ({"x": (1, 128, 384), "scale": (384,), "bias": (384,)}, -1, 1e-12),
    "no-bias": ({"x": (3, 5, 48), "scale": (48,)}, -1, 1e-5),
    "two-trailing-axes": ({"x": (2, 3, 4, 5), "scale": (4, 5), "bias": (4, 5)}, 2, 1e-5),
    "scale-with-leading-ones": ({"x": (2, 7, 16), "scale": (1, 16), "bias": (1, 1, 16)}, -1, 1e-5),
    "broadcast-scale": ({"x": (2, 3, 4, 5), "scale": (5,), "bias": (4, 5)}, -2, 1e-5),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("equal_rows", [False, True])
def test_layer_norm_matches_onnxruntime(case: str, equal_rows: bool) -> None:
    shapes, axis, epsilon = CASES[case]
    rng = np.random.default_rng(3)
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    if equal_rows:
        feeds["x"][0] = 0.25
    model = _model(shapes, axis, epsilon)
    options = spawnml.SessionOptions(graph_optimization_level="disable")
    ours = spawnml.InferenceSession(model, options, providers=["cpu"]).run(None, feeds)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, expected in zip(ours, want, strict=True):
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
