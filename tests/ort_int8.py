"""Whether onnxruntime's 8-bit products are exact on this machine, and the weights to test with.

On x86-64 CPUs with AVX2 but without AVX-512 VNNI, onnxruntime's kernels for uint8 x int8
products multiply with ``vpmaddubsw``, which adds each pair of products into an int16 with
saturation: two products of 255 and -128 give -32,768 rather than -65,280. Its quantization tools
offer ``reduce_range`` (7-bit weights) for that reason. SpawnML's integer products are exact, so
where onnxruntime saturates it is a reference only for weights no pair of products can saturate
with.
"""

from __future__ import annotations

import functools

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

#: The widest int8 weight range whose products with uint8 values cannot saturate a pair:
#: 2 * 255 * 64 = 32,640 <= 32,767.
SAFE_INT8_WEIGHTS = (-64, 63)


@functools.cache
def onnxruntime_saturates() -> bool:
    """Whether onnxruntime's uint8 x int8 MatMulInteger saturates pairs of products here."""
    a = np.full((4, 64), 255, np.uint8)
    b = np.full((64, 4), -128, np.int8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])],
        "probe",
        [
            helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape),
            helper.make_tensor_value_info("b", TensorProto.INT8, b.shape),
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT32, (4, 4))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"a": a, "b": b})
    return not np.array_equal(got, a.astype(np.int32) @ b.astype(np.int32))


def int8_weights(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random int8 weights over the whole range, or over :data:`SAFE_INT8_WEIGHTS` where
    onnxruntime saturates."""
    low, high = SAFE_INT8_WEIGHTS if onnxruntime_saturates() else (-128, 127)
    return rng.integers(low, high + 1, shape).astype(np.int8)


def skip_full_range_where_saturated() -> None:
    """Skip a comparison of a model quantized with full-range weights where onnxruntime saturates."""
    if onnxruntime_saturates():
        pytest.skip(
            "onnxruntime's uint8 x int8 products saturate pairs to int16 on this CPU (AVX2 without "
            "VNNI), so it is no reference for full-range weights; the reduce_range variants are compared"
        )
