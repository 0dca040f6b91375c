"""MatMulNBits at ``accuracy_level=4`` (as onnxruntime-genai's model builder writes for the CPU):
onnxruntime's CPU kernel quantizes the activations to 8 bits per block before the product, and
the CPU backend follows it. Compared with onnxruntime's CPU provider, one node at a time.

Tolerance: the products of each block are exact integers in both; float32 rounding of the block
scales' products and of their sum leaves outputs within ``RTOL`` of the largest (measured: at
most 3e-7). Without the 8-bit activations the difference would be about 5e-3.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import spawnml
from onnx import helper, numpy_helper

MS = "com.microsoft"
RTOL = 1e-6
COLUMNS = 24


def packed_fields(values: np.ndarray, bits: int) -> np.ndarray:
    """``bits``-bit ``values`` packed into bytes along the last axis, lowest first."""
    per_byte = 8 // bits
    fields = values.reshape(*values.shape[:-1], -1, per_byte)
    packed = np.zeros(fields.shape[:-1], np.uint8)
    for index in range(per_byte):
        packed |= fields[..., index] << np.uint8(index * bits)
    return packed


def nbits_model(
    rng: np.random.Generator, depth: int, bits: int, block: int, zero_points: bool, dtype: type
) -> bytes:
    blocks = -(-depth // block)
    weights = rng.integers(0, 1 << bits, (COLUMNS, blocks, block), dtype=np.uint8)
    initializers = [
        numpy_helper.from_array(packed_fields(weights, bits), "b"),
        numpy_helper.from_array(rng.uniform(0.01, 0.1, COLUMNS * blocks).astype(dtype), "scales"),
    ]
    if zero_points:
        per_byte = 8 // bits
        points = rng.integers(0, 1 << bits, (COLUMNS, -(-blocks // per_byte) * per_byte), dtype=np.uint8)
        initializers.append(numpy_helper.from_array(packed_fields(points, bits).reshape(-1), "zero_points"))
    node = helper.make_node(
        "MatMulNBits",
        ["a", *(tensor.name for tensor in initializers)],
        ["y"],
        domain=MS,
        K=depth,
        N=COLUMNS,
        bits=bits,
        block_size=block,
        accuracy_level=4,
    )
    element = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph(
        [node],
        "nbits",
        [helper.make_tensor_value_info("a", element, None)],
        [helper.make_tensor_value_info("y", element, None)],
        initializers,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def compare(depth: int, bits: int, block: int, rows: int, zero_points: bool, dtype: type = np.float32):
    rng = np.random.default_rng(depth * 100 + bits * 10 + rows)
    model = nbits_model(rng, depth, bits, block, zero_points, dtype)
    feeds: dict[str, np.ndarray] = {"a": (rng.standard_normal((rows, depth)) * 3).astype(dtype)}
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    (want,) = session.run(None, feeds)
    (got,) = spawnml.InferenceSession(model, providers=["cpu"]).run(None, feeds)
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    rtol = RTOL if dtype == np.float32 else float(np.finfo(dtype).eps)
    np.testing.assert_allclose(got, want, rtol=0, atol=rtol * float(np.abs(want).max()))


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize(("depth", "block"), [(128, 32), (100, 32), (256, 64), (64, 16)])
@pytest.mark.parametrize("rows", [1, 5])
def test_int8_activations(bits: int, depth: int, block: int, rows: int):
    """Weights of 2, 4 and 8 bits; K a multiple of the block or not; one row (a decoding step,
    onnxruntime's matrix-vector path) or several. 2-bit weights in blocks of 16 onnxruntime
    multiplies in float, and so does the CPU backend."""
    compare(depth, bits, block, rows, zero_points=False)


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_int8_activations_zero_points(bits: int):
    compare(128, bits, 32, 3, zero_points=True)


def test_int8_activations_float16():
    compare(128, 4, 32, 3, zero_points=False, dtype=np.float16)
