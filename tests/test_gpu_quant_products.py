"""The quantized products that matter for speed on every GPU backend, against onnxruntime's CPU
provider: MatMulInteger, and onnxruntime's fused com.microsoft DynamicQuantizeMatMul and
MatMulIntegerToFloat (per tensor and per column, uint8 and int8 weights, with and without bias).
QAttention is refused at load with its reason.

Each case is a one-node model run whole on the GPU provider (its placement is checked). The
integer sums are exact, so MatMulInteger must equal onnxruntime's; the float products differ from
onnxruntime's only by float32 rounding of the scaling (``RTOL`` of the output's largest magnitude).
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper

from tests.backends import GPU_BACKENDS, backend_or_skip

MS = "com.microsoft"
#: Float32 rounding of the scale and bias steps, of the output's largest magnitude.
RTOL = 1e-6

rng = np.random.default_rng(29)


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def one_node(
    op: str, domain: str, feeds: dict[str, np.ndarray], constants: dict[str, np.ndarray | None]
) -> bytes:
    """A model of one ``op`` node over ``feeds`` (graph inputs) then ``constants`` (initializers;
    None leaves an optional input out)."""
    names = [*feeds, *(name if value is not None else "" for name, value in constants.items())]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, names, ["y"], domain=domain)
    graph = helper.make_graph(
        [node],
        op,
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in feeds.items()
        ],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, n) for n, v in constants.items() if v is not None],
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(MS, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()


def run_both(model: bytes, provider: str, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    session = spawnml.InferenceSession(model, providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    (got,) = session.run(None, feeds)
    (want,) = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    return got, want


def quantized(dtype: type, *shape: int) -> np.ndarray:
    """Random values of ``dtype``; int8 ones in [-64, 64): onnxruntime's uint8 x int8 products add
    pairs of products in int16 with saturation (why ``quantize_dynamic`` offers ``reduce_range``),
    which this keeps from binding, so that its sums are exact too."""
    low, high = (-64, 63) if dtype is np.int8 else (np.iinfo(dtype).min, np.iinfo(dtype).max)
    return rng.integers(low, high + 1, shape).astype(dtype)


WEIGHTS = [
    pytest.param(np.uint8, False, id="uint8-tensor"),
    pytest.param(np.int8, True, id="int8-column"),
    pytest.param(np.uint8, True, id="uint8-column"),
]


@pytest.mark.parametrize(("weight_type", "per_column"), WEIGHTS)
def test_matmul_integer(provider: str, weight_type: type, per_column: bool) -> None:
    a = quantized(np.uint8, 2, 5, 24)
    b = quantized(weight_type, 24, 7)
    zero = quantized(weight_type, 7) if per_column else quantized(weight_type)
    model = one_node(
        "MatMulInteger", "", {"a": a}, {"b": b, "a_zero_point": np.array(131, np.uint8), "b_zero_point": zero}
    )
    got, want = run_both(model, provider, {"a": a})
    np.testing.assert_array_equal(got, want)


def weight_constants(weight_type: type, per_column: bool, bias: bool, n: int = 7) -> dict:
    scale = rng.uniform(0.001, 0.02, n if per_column else ()).astype(np.float32)
    zero = quantized(weight_type, n) if per_column else quantized(weight_type)
    return {
        "b": quantized(weight_type, 24, n),
        "b_scale": scale,
        "b_zero_point": zero,
        "bias": rng.standard_normal(n).astype(np.float32) if bias else None,
    }


@pytest.mark.parametrize("bias", [False, True], ids=["", "bias"])
@pytest.mark.parametrize(("weight_type", "per_column"), WEIGHTS)
def test_dynamic_quantize_matmul(provider: str, weight_type: type, per_column: bool, bias: bool) -> None:
    a = (rng.standard_normal((3, 4, 24)) * 3 + 0.5).astype(np.float32)
    model = one_node("DynamicQuantizeMatMul", MS, {"a": a}, weight_constants(weight_type, per_column, bias))
    got, want = run_both(model, provider, {"a": a})
    np.testing.assert_allclose(got, want, rtol=0, atol=RTOL * np.abs(want).max())


@pytest.mark.parametrize("bias", [False, True], ids=["", "bias"])
@pytest.mark.parametrize(("weight_type", "per_column"), WEIGHTS)
def test_matmul_integer_to_float(provider: str, weight_type: type, per_column: bool, bias: bool) -> None:
    a = quantized(np.uint8, 6, 24)
    weights = weight_constants(weight_type, per_column, bias)
    constants = {
        "b": weights["b"],
        "a_scale": np.array(0.03, np.float32),
        "b_scale": weights["b_scale"],
        "a_zero_point": np.array(120, np.uint8),
        "b_zero_point": weights["b_zero_point"],
        "bias": weights["bias"],
    }
    got, want = run_both(one_node("MatMulIntegerToFloat", MS, {"a": a}, constants), provider, {"a": a})
    np.testing.assert_allclose(got, want, rtol=0, atol=RTOL * np.abs(want).max())


def test_qattention_is_refused_with_its_reason(provider: str) -> None:
    x = quantized(np.uint8, 1, 3, 8)
    constants = {
        "weight": quantized(np.uint8, 8, 24),
        "bias": np.zeros(24, np.float32),
        "input_scale": np.array(0.1, np.float32),
        "weight_scale": np.array(0.1, np.float32),
    }
    node = helper.make_node("QAttention", ["x", *constants], ["y"], domain=MS, num_heads=2)
    graph = helper.make_graph(
        [node],
        "qattention",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, x.shape)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, n) for n, v in constants.items()],
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(MS, 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()
    with pytest.raises(
        spawnml.UnsupportedOperatorError,
        match=r"QAttention .*: no \w+ kernel: its heads are com.microsoft Attention's",
    ):
        spawnml.InferenceSession(model, providers=[provider])
