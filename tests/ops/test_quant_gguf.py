"""``spawnml.gguf::QuantizedMatMul``, ``QuantizedGather`` and the block dequantizers against the
``gguf`` library.

Dequantization must equal ``gguf.quants.dequantize`` exactly (both do the same float32 operations
per element). The matmul is checked against ``gguf.quants.dequantize`` followed by a float32
matmul, within the worst-case float32 rounding of a dot product summed in any order
(``cols * eps * |x| @ |W|^T``): the same products, summed in another order (the repacked path
takes each block's scale out of its sum). It runs with
one and six rows of activations (every block type but BF16 runs on its weight repacked once,
see test_quant_gguf_packed.py) and with 32 (every type dequantizes for a BLAS product).
QuantizedGather's rows must equal gguf's dequantized table indexed the same way, exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize as reference_dequantize
from gguf.quants import quantize
from spawnml.ir import Graph, Node, Value
from spawnml_cpu.kernels.quant_gguf import BLOCK_TYPES, dequantize

#: Types ``gguf.quants.quantize`` can make from floats; the K-quants get random blocks.
QUANTIZABLE = ("BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")
#: Byte offsets of the float16 scales in each K-quant block, kept small and finite.
K_SCALES = {"Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}

rng = np.random.default_rng(0)


def blocks_of(quant_type: str, rows: int, cols: int) -> np.ndarray:
    """Raw ``uint8 [rows, cols / block * bytes]`` blocks of ``quant_type``."""
    if quant_type in QUANTIZABLE:
        values = rng.standard_normal((rows, cols)).astype(np.float32)
        return quantize(values, GGMLQuantizationType[quant_type])
    block_bytes = BLOCK_TYPES[quant_type].bytes
    blocks = rng.integers(0, 256, (rows * cols // 256, block_bytes), dtype=np.uint8)
    for start in K_SCALES[quant_type]:
        scales = rng.uniform(-0.05, 0.05, len(blocks)).astype(np.float16)
        blocks[:, start : start + 2] = scales.view(np.uint8).reshape(-1, 2)
    return blocks.reshape(rows, -1)


@pytest.mark.parametrize("quant_type", list(BLOCK_TYPES))
def test_block_layout_matches_gguf(quant_type: str) -> None:
    assert GGML_QUANT_SIZES[GGMLQuantizationType[quant_type]] == BLOCK_TYPES[quant_type][:2]


@pytest.mark.parametrize("quant_type", list(BLOCK_TYPES))
def test_dequantize_is_exactly_gguf(quant_type: str) -> None:
    data = blocks_of(quant_type, 8, 512)
    want = reference_dequantize(data, GGMLQuantizationType[quant_type])
    np.testing.assert_array_equal(dequantize(data, quant_type), want)


def matmul_graph(quant_type: str, rows: int, cols: int, weights: np.ndarray) -> Graph:
    node = Node(
        "QuantizedMatMul",
        ["x", "w"],
        ["y"],
        {"quant_type": quant_type, "rows": rows, "cols": cols},
        domain="spawnml.gguf",
    )
    return Graph(
        nodes=[node],
        inputs=[Value("x", np.dtype(np.float32), ("batch", "tokens", cols))],
        outputs=[Value("y", np.dtype(np.float32), None)],
        initializers={"w": weights},
        opset_imports={"": 17, "spawnml.gguf": 1},
    )


@pytest.mark.parametrize("leading", [(1, 1), (2, 3), (4, 8)], ids=str)
@pytest.mark.parametrize("quant_type", list(BLOCK_TYPES))
def test_quantized_matmul_matches_dequantized_matmul(quant_type: str, leading: tuple[int, int]) -> None:
    rows, cols = 40, 512
    weights = blocks_of(quant_type, rows, cols)
    x = rng.standard_normal((*leading, cols)).astype(np.float32)
    session = spawnml.InferenceSession(matmul_graph(quant_type, rows, cols, weights), providers=["cpu"])
    y = np.asarray(session.run(None, {"x": x})[0])
    dequantized = reference_dequantize(weights, GGMLQuantizationType[quant_type])
    assert y.dtype == np.float32 and y.shape == (*leading, rows)
    bound = cols * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(dequantized).T)
    np.testing.assert_array_less(np.abs(y - x @ dequantized.T), bound)


def test_shape_inference() -> None:
    graph = matmul_graph("Q8_0", 40, 64, blocks_of("Q8_0", 40, 64))
    inferred = spawnml.passes.infer_shapes(graph)["y"]
    assert inferred.dtype == np.float32 and inferred.shape == ("batch", "tokens", 40)


@pytest.mark.parametrize(
    ("attrs", "reason"),
    [
        ({"quant_type": "IQ2_XXS", "rows": 40, "cols": 256}, "quant_type='IQ2_XXS': the CPU reads"),
        ({"quant_type": "Q4_K", "rows": 40, "cols": 64}, "cols whole Q4_K blocks"),
    ],
)
def test_unsupported_types_are_refused_at_load(attrs: dict, reason: str) -> None:
    graph = matmul_graph(attrs["quant_type"], attrs["rows"], attrs["cols"], np.zeros((40, 8), np.uint8))
    with pytest.raises(spawnml.UnsupportedOperatorError, match=reason):
        spawnml.InferenceSession(graph, providers=["cpu"])


def gather_graph(quant_type: str, rows: int, cols: int, weights: np.ndarray) -> Graph:
    node = Node(
        "QuantizedGather",
        ["w", "ids"],
        ["y"],
        {"quant_type": quant_type, "rows": rows, "cols": cols},
        domain="spawnml.gguf",
    )
    return Graph(
        nodes=[node],
        inputs=[Value("ids", np.dtype(np.int64), ("batch", "tokens"))],
        outputs=[Value("y", np.dtype(np.float32), None)],
        initializers={"w": weights},
        opset_imports={"": 17, "spawnml.gguf": 1},
    )


@pytest.mark.parametrize("quant_type", list(BLOCK_TYPES))
def test_quantized_gather_is_exactly_the_dequantized_rows(quant_type: str) -> None:
    rows, cols = 40, 512
    weights = blocks_of(quant_type, rows, cols)
    ids = np.array([[3, 0, 39, 3], [7, 7, 1, 20]], np.int64)
    session = spawnml.InferenceSession(gather_graph(quant_type, rows, cols, weights), providers=["cpu"])
    y = np.asarray(session.run(None, {"ids": ids})[0])
    table = reference_dequantize(weights, GGMLQuantizationType[quant_type])
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, table[ids])
    inferred = spawnml.passes.infer_shapes(session.graph)["y"]
    assert inferred.dtype == np.float32 and inferred.shape == ("batch", "tokens", cols)


@pytest.mark.parametrize("index", [-1, 40])
def test_quantized_gather_refuses_rows_outside_the_table(index: int) -> None:
    session = spawnml.InferenceSession(
        gather_graph("Q8_0", 40, 64, blocks_of("Q8_0", 40, 64)), providers=["cpu"]
    )
    with pytest.raises(spawnml.SpawnMLError, match=r"indices must lie in \[0, 40\)"):
        session.run(None, {"ids": np.array([[0, index]], np.int64)})
