"""The CPU's GlobalAveragePool (every plane summed by one matrix-vector product with ones, then
divided by its size) against onnxruntime: MobileNetV2's 1280 planes of 7x7, other ranks and
batches, and planes holding infinities and NaN, which must come out as onnxruntime's; float64
(which onnxruntime's CPU GlobalAveragePool does not take) against PyTorch's adaptive_avg_pool2d,
as torchvision's MobileNetV2 pools. The node runs unoptimized on one and on two threads.
Tolerances: float32 within rtol 1e-5 / atol 1e-6 (49 to 4096 values summed in another order),
float64 within 1e-12.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper

from tests.unoptimized import run_onnxruntime, run_spawnml

#: Input shapes: MobileNetV2's head, a batch, 1-d and 3-d planes, one large plane.
SHAPES = {
    "mobilenet-head": (1, 1280, 7, 7),
    "batch-of-3": (3, 96, 14, 14),
    "1d-planes": (2, 5, 17),
    "3d-planes": (1, 4, 3, 5, 6),
    "one-large-plane": (1, 2, 64, 64),
}


def _model(rank: int, elem: int) -> bytes:
    node = helper.make_node("GlobalAveragePool", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "global-average-pool",
        [helper.make_tensor_value_info("x", elem, [None] * rank)],
        [helper.make_tensor_value_info("y", elem, None)],
    )
    opsets = [helper.make_opsetid("", 17)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()


def _ours(model: bytes, x: np.ndarray, threads: int = 1) -> np.ndarray:
    return run_spawnml(model, {"x": x}, threads=threads)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_global_average_pool_matches_onnxruntime(name, threads):
    shape = SHAPES[name]
    x = np.random.default_rng(len(shape) + shape[1]).standard_normal(shape).astype(np.float32)
    model = _model(len(shape), TensorProto.FLOAT)
    ours, reference = _ours(model, x, threads), run_onnxruntime(model, {"x": x})
    assert ours.shape == reference.shape == (*shape[:2], *(1,) * (len(shape) - 2))
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("threads", [1, 2])
def test_float64_global_average_pool_matches_pytorch(threads):
    x = np.random.default_rng(11).standard_normal((2, 1280, 7, 7))
    ours = _ours(_model(4, TensorProto.DOUBLE), x, threads)
    reference = torch.nn.functional.adaptive_avg_pool2d(torch.from_numpy(x), 1).numpy()
    assert ours.dtype == np.float64
    np.testing.assert_allclose(ours, reference, rtol=1e-12, atol=1e-13)


def test_global_average_pool_keeps_infinities_and_nan():
    """Planes with +inf, -inf, both (NaN), a NaN, and the largest floats (their sum overflows)."""
    x = np.random.default_rng(3).standard_normal((1, 6, 7, 7)).astype(np.float32)
    x[0, 0, 1, 2] = np.inf
    x[0, 1, 3, 3] = -np.inf
    x[0, 2, 0, 0], x[0, 2, 6, 6] = np.inf, -np.inf
    x[0, 3, 4, 5] = np.nan
    x[0, 4] = np.finfo(np.float32).max
    model = _model(4, TensorProto.FLOAT)
    ours, reference = _ours(model, x), run_onnxruntime(model, {"x": x})
    np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert np.isposinf(ours[0, 0]) and np.isneginf(ours[0, 1]) and np.isnan(ours[0, 2:4]).all()
