"""MatMul and Gemm on two threads (one BLAS thread below ``BLAS_THREADS_WORK``, two above it),
against onnxruntime. Float32 within rtol 1e-5 / atol 1e-4 (sums of up to 512 products)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import spawnml
from onnx import TensorProto, helper
from spawnml_cpu.kernels.threads import BLAS_THREADS_WORK
from threadpoolctl import threadpool_limits

#: (A shape, B shape): rows of a stack times one matrix, a stack of products, large and small.
CASES = {
    "rows": ((4, 128, 96), (96, 256)),
    "batches": ((2, 6, 128, 64), (2, 6, 64, 128)),
    "matrix": ((300, 256), (256, 200)),
    "large": ((512, 512), (512, 512)),
}


def _run_both(nodes, shapes: dict[str, tuple[int, ...]], feeds: dict[str, np.ndarray]):
    graph = helper.make_graph(
        nodes,
        "products",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in shapes.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    (ours,) = spawnml.InferenceSession(model, providers=["cpu"]).run(None, feeds)
    (reference,) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    return ours, reference


@pytest.mark.parametrize("name", sorted(CASES))
def test_matmul_on_two_threads_matches_onnxruntime(name):
    a_shape, b_shape = CASES[name]
    assert (np.prod(a_shape) * b_shape[-1] >= BLAS_THREADS_WORK) == (name == "large")
    rng = np.random.default_rng(3)
    feeds = {"a": rng.standard_normal(a_shape, np.float32), "b": rng.standard_normal(b_shape, np.float32)}
    with threadpool_limits(2, user_api="blas"):
        ours, reference = _run_both(
            [helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a_shape, "b": b_shape}, feeds
        )
    assert ours.shape == reference.shape
    np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-4)


def test_gemm_on_two_threads_matches_onnxruntime():
    rng = np.random.default_rng(4)
    feeds = {
        "a": rng.standard_normal((256, 300), np.float32),
        "b": rng.standard_normal((200, 256), np.float32),
        "c": rng.standard_normal(200, np.float32),
    }
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)
    with threadpool_limits(2, user_api="blas"):
        ours, reference = _run_both([node], {"a": (256, 300), "b": (200, 256), "c": (200,)}, feeds)
    np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-4)
