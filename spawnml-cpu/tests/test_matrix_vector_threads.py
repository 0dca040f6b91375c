"""Matrix-vector products give equal outputs for equal weights on any number of BLAS threads.

OpenBLAS spreads a matrix-vector product over its threads by cutting the outputs into one share
per thread, and computes the last outputs of each share with a narrower kernel that rounds
differently: equal weight columns gave outputs one float32 ulp apart, at places that follow the
thread count. onnx's light models (every weight 0.02) end in a Softmax of equal logits near 4e12,
where an ulp is 2.6e5, so with BLAS on 16 threads (a 16-core machine) five of them returned zeros
and a few 1/32 instead of 1/1000. Checked against onnx's stored outputs and onnxruntime with the
light models' tolerances (rtol 1e-3, atol 1e-7); 3 threads is the fewest that cut 1000 outputs
into uneven shares.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper
from spawnml.conformance.onnx_cases import onnx_cases
from spawnml.conformance.runner import SpawnMLTarget, Status, run_case
from spawnml_cpu.kernels import threads

#: The light models whose last Gemm feeds a Softmax of equal logits.
LIGHT_MODELS = ("test_bvlc_alexnet", "test_inception_v1", "test_resnet50", "test_vgg19", "test_zfnet512")
RTOL, ATOL = 1e-3, 1e-7
DEPTH, OUTPUTS = 4096, 1000
#: (product node, x shape, weight shape, softmax axis): one row times a matrix (the light models'
#: classifier), and a matrix times one column.
PRODUCTS = {
    "gemm_one_row": (
        helper.make_node("Gemm", ["x", "w"], ["product"], transB=1),
        (1, DEPTH),
        (OUTPUTS, DEPTH),
        -1,
    ),
    "matmul_one_column": (helper.make_node("MatMul", ["w", "x"], ["product"]), (DEPTH,), (OUTPUTS, DEPTH), 0),
}


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_on_sixteen_blas_threads(name, monkeypatch):
    (case,) = [case for case in onnx_cases("real") if case.name == name]
    monkeypatch.setattr(threads, "default_thread_count", lambda: 16)  # the runner's sessions take the default
    outcome = run_case(case, SpawnMLTarget("cpu"))
    assert outcome.status is Status.PASS, outcome.message


@pytest.mark.parametrize("blas_threads", [3, 16])
@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_equal_weights_give_equal_outputs(name, blas_threads, monkeypatch):
    monkeypatch.setattr(threads, "BLAS_THREADS_WORK", 0)  # every product large enough for BLAS's threads
    node, x_shape, w_shape, axis = PRODUCTS[name]
    graph = helper.make_graph(
        [node, helper.make_node("Softmax", ["product"], ["y"], axis=axis)],
        "equal_weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.full(w_shape, 0.02, np.float32), "w")],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8
    ).SerializeToString()
    feeds = {"x": np.random.default_rng(0).uniform(0, 1e9, x_shape).astype(np.float32)}
    (reference,) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    options = spawnml.SessionOptions(intra_op_num_threads=blas_threads)
    (ours,) = spawnml.InferenceSession(model, options, providers=["cpu"]).run(None, feeds)
    np.testing.assert_allclose(ours, reference, rtol=RTOL, atol=ATOL)
