"""MatMul and Gemm on two threads (BLAS's threads from ``BLAS_THREADS_WORK`` multiply-adds on, one
BLAS thread below it and for matrix-vector products), against onnxruntime. Float32 within rtol
1e-5 / atol 1e-4 (sums of up to 4096 products of normals scaled by 1/sqrt(depth))."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import spawnml
from onnx import NodeProto, TensorProto, helper, numpy_helper
from spawnml_cpu.kernels.threads import BLAS_THREADS_WORK

RTOL, ATOL = 1e-5, 1e-4
#: name: (A shape, B shape, whether BLAS's threads take it). MiniLM's products at batch 1 x 128
#: tokens (projections, the feed-forward pair, the per-head products), a width of no round size,
#: a 2-D product, a stack times a broadcast stack; then products that stay on one BLAS thread.
CASES = {
    "projection": ((1, 128, 384), (384, 384), True),
    "feed_forward_up": ((1, 128, 384), (384, 1536), True),
    "feed_forward_down": ((1, 128, 1536), (1536, 384), True),
    "head_scores": ((1, 12, 128, 32), (1, 12, 32, 128), True),
    "head_values": ((1, 12, 128, 128), (1, 12, 128, 32), True),
    "ragged_columns": ((3, 200, 150), (150, 333), True),
    "matrix": ((512, 512), (512, 512), True),
    "broadcast_stack": ((4, 12, 128, 32), (12, 32, 128), True),
    "small": ((4, 32, 96), (96, 64), False),
    "one_column": ((1, 128, 384), (384, 1), False),
    "one_row": ((1, 1, 4096), (4096, 4096), False),
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


def _run_both(model: bytes, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    options = spawnml.SessionOptions(intra_op_num_threads=2)
    (ours,) = spawnml.InferenceSession(model, options, providers=["cpu"]).run(None, feeds)
    (reference,) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    return ours, reference


def _normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matmul_on_two_threads_matches_onnxruntime(name):
    a_shape, b_shape, blas_threads = CASES[name]
    matrix_vector = a_shape[-2] == 1 or b_shape[-1] == 1
    assert (np.prod(a_shape) * b_shape[-1] >= BLAS_THREADS_WORK and not matrix_vector) == blas_threads
    rng = np.random.default_rng(11)
    a, b = _normal(rng, a_shape), _normal(rng, b_shape)
    model = _model(helper.make_node("MatMul", ["a", "b"], ["y"]), {"a": a_shape, "b": b_shape})
    ours, reference = _run_both(model, {"a": a, "b": b})
    assert ours.shape == reference.shape
    np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=ATOL)


def test_matmul_with_a_constant_weight_on_two_threads_matches_onnxruntime():
    """A weight the plan holds read-only, as a model's are."""
    rng = np.random.default_rng(12)
    x, w = _normal(rng, (2, 64, 384)), _normal(rng, (384, 512))
    model = _model(helper.make_node("MatMul", ["x", "w"], ["y"]), {"x": x.shape}, weight=w)
    ours, reference = _run_both(model, {"x": x})
    np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=ATOL)


def test_gemm_of_transposed_operands_on_two_threads_matches_onnxruntime():
    rng = np.random.default_rng(13)
    a, b, c = _normal(rng, (384, 128)), _normal(rng, (768, 384)), _normal(rng, (768,))
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)
    model = _model(node, {"a": a.shape, "b": b.shape, "c": c.shape})
    ours, reference = _run_both(model, {"a": a, "b": b, "c": c})
    np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=ATOL)
