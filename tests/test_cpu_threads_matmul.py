"""MatMul and Gemm products cut over the CPU backend's threads (spans of output columns, runs of a
stack's products), against onnxruntime. Float32 within rtol 1e-5 / atol 1e-4 (sums of up to 4096
products of normals scaled by 1/sqrt(depth)).

Each case is also checked to take the path it names (split or whole), so that the comparison covers
that path.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import spawnml
from onnx import NodeProto, TensorProto, helper, numpy_helper
from spawnml_cpu.kernels.threads import split_matmul
from threadpoolctl import threadpool_limits

RTOL, ATOL = 1e-5, 1e-4
#: name: (A shape, B shape, BLAS threads, whether the product is split). MiniLM's products at batch
#: 1 x 128 tokens (projections, the feed-forward pair) and its per-head products at batch 4, a width
#: that leaves a partial last span of columns, a 2-D product; then products that stay whole.
CASES = {
    "projection": ((1, 128, 384), (384, 384), 2, True),
    "feed_forward_up": ((1, 128, 384), (384, 1536), 2, True),
    "feed_forward_down": ((1, 128, 1536), (1536, 384), 2, True),
    "head_scores": ((4, 12, 128, 32), (4, 12, 32, 128), 2, True),
    "head_values": ((4, 12, 128, 128), (4, 12, 128, 32), 2, True),
    "ragged_columns": ((3, 200, 150), (150, 333), 2, True),
    "matrix": ((600, 256), (256, 200), 2, True),
    "small_heads": ((1, 12, 128, 32), (1, 12, 32, 128), 2, False),
    "one_column": ((1, 128, 384), (384, 1), 2, False),
    "one_row": ((1, 1, 4096), (4096, 4096), 2, False),
    "broadcast_stack": ((4, 12, 128, 32), (12, 32, 128), 2, False),
    "one_thread": ((1, 128, 384), (384, 1536), 1, False),
}


def _model(node: NodeProto, inputs: dict[str, tuple[int, ...]], weight: np.ndarray | None = None) -> bytes:
    graph = helper.make_graph(
        [node],
        "product",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [] if weight is None else [numpy_helper.from_array(weight, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _run_both(model: bytes, feeds: dict[str, np.ndarray], threads: int = 2) -> tuple[np.ndarray, np.ndarray]:
    with threadpool_limits(threads, user_api="blas"):
        (ours,) = spawnml.InferenceSession(model, providers=["cpu"]).run(None, feeds)
    (reference,) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    return ours, reference


def _normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matmul_matches_onnxruntime(name):
    a_shape, b_shape, threads, split = CASES[name]
    rng = np.random.default_rng(11)
    a, b = _normal(rng, a_shape), _normal(rng, b_shape)
    with threadpool_limits(threads, user_api="blas"):
        assert (split_matmul(a, b) is not None) == split
    model = _model(helper.make_node("MatMul", ["a", "b"], ["y"]), {"a": a_shape, "b": b_shape})
    ours, reference = _run_both(model, {"a": a, "b": b}, threads)
    assert ours.shape == reference.shape
    np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=ATOL)


def test_split_matmul_with_a_constant_weight_matches_onnxruntime():
    """A weight the plan holds read-only, as a model's are."""
    rng = np.random.default_rng(12)
    x, w = _normal(rng, (2, 64, 384)), _normal(rng, (384, 512))
    model = _model(helper.make_node("MatMul", ["x", "w"], ["y"]), {"x": x.shape}, weight=w)
    ours, reference = _run_both(model, {"x": x})
    np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=ATOL)


def test_split_gemm_of_transposed_operands_matches_onnxruntime():
    rng = np.random.default_rng(13)
    a, b, c = _normal(rng, (384, 128)), _normal(rng, (768, 384)), _normal(rng, (768,))
    with threadpool_limits(2, user_api="blas"):
        assert split_matmul(a.T, b.T) is not None
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)
    model = _model(node, {"a": a.shape, "b": b.shape, "c": c.shape})
    ours, reference = _run_both(model, {"a": a, "b": b, "c": c})
    np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=ATOL)
