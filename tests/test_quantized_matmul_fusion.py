"""The dynamically quantized products ``quantize_dynamic`` writes (DynamicQuantizeLinear ->
MatMulInteger -> Cast -> Mul by the product of the scales, + a bias) fuse into com.microsoft
DynamicQuantizeMatMul, or MatMulIntegerToFloat where the quantized input feeds several products.

The fused session computes the same float32 operations as the unfused one, so their results are
equal bit for bit; both are checked against onnxruntime too, with weights within +-63 so that its
AVX2 kernel (which adds pairs of uint8 x int8 products in saturating int16) is exact as well.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper
from spawnml.session import SessionOptions

RNG = np.random.default_rng(23)
FLOAT = TensorProto.FLOAT
DEPTH, WIDTH = 48, 20


def weights(name: str, per_column: bool) -> list:
    """A quantized weight ``name``, its scale and zero point (one, or one per column)."""
    count = WIDTH if per_column else 1
    shape = [count] if per_column else []
    return [
        numpy_helper.from_array(RNG.integers(-63, 64, (DEPTH, WIDTH)).astype(np.int8), name),
        numpy_helper.from_array(
            RNG.uniform(0.01, 0.02, shape).astype(np.float32).reshape(shape), f"{name}_scale"
        ),
        numpy_helper.from_array(RNG.integers(-3, 4, shape).astype(np.int8), f"{name}_zero"),
    ]


def product(x: str, name: str, output: str) -> list:
    """quantize_dynamic's nodes of one product of the quantized ``x`` by the weight ``name``."""
    return [
        helper.make_node("Mul", [f"{x}_scale", f"{name}_scale"], [f"{name}_scales"]),
        helper.make_node("MatMulInteger", [f"{x}_q", name, f"{x}_zero", f"{name}_zero"], [f"{name}_int"]),
        helper.make_node("Cast", [f"{name}_int"], [f"{name}_float"], to=FLOAT),
        helper.make_node("Mul", [f"{name}_float", f"{name}_scales"], [output]),
    ]


def model(products: int, bias: bool, per_column: bool) -> bytes:
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["x_q", "x_scale", "x_zero"])]
    initializers, outputs = [], []
    for index in range(products):
        name, output = f"w{index}", f"y{index}"
        initializers += weights(name, per_column)
        nodes += product("x", name, f"{output}_unbiased" if bias else output)
        if bias:
            initializers.append(
                numpy_helper.from_array(RNG.standard_normal(WIDTH).astype(np.float32), f"b{index}")
            )
            nodes.append(helper.make_node("Add", [f"b{index}", f"{output}_unbiased"], [output]))
        outputs.append(helper.make_tensor_value_info(output, FLOAT, [2, 7, WIDTH]))
    graph = helper.make_graph(
        nodes, "quantized", [helper.make_tensor_value_info("x", FLOAT, [2, 7, DEPTH])], outputs, initializers
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def run(data: bytes, level: str, feeds: dict[str, np.ndarray]) -> tuple[list[str], list[np.ndarray]]:
    session = spawnml.InferenceSession(
        data, SessionOptions(graph_optimization_level=level), providers=["cpu"]
    )
    return [node.op_type for node in session.graph.nodes], [np.asarray(y) for y in session.run(None, feeds)]


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("per_column", [False, True], ids=["tensor", "column"])
@pytest.mark.parametrize(
    ("products", "fused_as"), [(1, "DynamicQuantizeMatMul"), (2, "MatMulIntegerToFloat")]
)
def test_quantized_products_fuse_with_the_same_results(products, fused_as, bias, per_column):
    data = model(products, bias, per_column)
    feeds = {"x": RNG.standard_normal((2, 7, DEPTH)).astype(np.float32)}
    fused_ops, fused = run(data, "all", feeds)
    plain_ops, plain = run(data, "disable", feeds)
    assert fused_ops.count(fused_as) == products
    assert "MatMulInteger" not in fused_ops and "Cast" not in fused_ops
    assert ("DynamicQuantizeLinear" in fused_ops) == (products > 1)
    assert "Add" not in fused_ops and plain_ops.count("MatMulInteger") == products
    reference = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, same, theirs in zip(fused, plain, reference, strict=True):
        np.testing.assert_array_equal(got, same)
        np.testing.assert_allclose(got, theirs, rtol=1e-6, atol=1e-6 * float(np.abs(theirs).max()))


def test_a_product_whose_scale_is_read_elsewhere_stays_unfused():
    proto = onnx.ModelProto()
    proto.ParseFromString(model(1, False, False))
    proto.graph.output.append(helper.make_tensor_value_info("w0_scales", FLOAT, []))
    feeds = {"x": RNG.standard_normal((2, 7, DEPTH)).astype(np.float32)}
    ops, _ = run(proto.SerializeToString(), "all", feeds)
    assert "MatMulInteger" in ops and "DynamicQuantizeMatMul" not in ops
