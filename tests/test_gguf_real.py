"""SmolLM2-135M-Instruct (Q4_1 + Q8_0 GGUF) through the GGUF loader and the CPU dequantizers.

Every tensor must decode to exactly what ``gguf`` decodes: float tensors byte for byte, quantized
ones through :func:`spawnml_cpu.kernels.quant_gguf.dequantize` against ``gguf.quants.dequantize``.
Needs ``scripts/fetch-models smollm2-gguf``; skips without the file unless SPAWNML_REQUIRE_MODELS=1.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import spawnml
from gguf import GGUFReader
from gguf.quants import dequantize as reference_dequantize
from spawnml.cli import model_report
from spawnml_cpu.kernels.quant_gguf import dequantize
from spawnml_formats.gguf.loader import quant_type
from spawnml_models.assets import asset_file

from tests.model_files import require

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def smollm2() -> Path:
    return require(lambda: asset_file("smollm2-gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"))


@pytest.fixture(scope="module")
def graph(smollm2: Path) -> spawnml.ir.Graph:
    return spawnml.load(smollm2)


def test_metadata(graph: spawnml.ir.Graph) -> None:
    metadata = graph.metadata
    assert metadata["general.architecture"] == "llama"
    assert metadata["llama.block_count"] == "30"
    assert metadata["llama.attention.head_count"] == "9"
    assert metadata["llama.attention.head_count_kv"] == "3"
    assert metadata["llama.embedding_length"] == "576"
    assert metadata["tokenizer.ggml.model"] == "gpt2"
    assert len(json.loads(metadata["tokenizer.ggml.tokens"])) == int(metadata["llama.vocab_size"]) == 49152
    assert metadata["tokenizer.chat_template"].startswith("{% for message in messages %}")


def test_every_tensor_decodes_as_gguf_decodes(smollm2: Path, graph: spawnml.ir.Graph) -> None:
    reader = GGUFReader(smollm2)
    types = Counter()
    assert len(graph.initializers) == len(reader.tensors) == 272
    for tensor in reader.tensors:
        ours = graph.initializers[tensor.name]
        kind = quant_type(graph, tensor.name)
        types[kind or str(ours.dtype)] += 1
        want = reference_dequantize(tensor.data, tensor.tensor_type)
        got = ours if kind is None else dequantize(ours, kind)
        assert got.shape == want.shape == tuple(reversed(tensor.shape.tolist())), tensor.name
        np.testing.assert_array_equal(got, want, err_msg=tensor.name)
    assert types == {"Q4_1": 210, "float32": 61, "Q8_0": 1}


def test_info_report(smollm2: Path) -> None:
    report = model_report(str(smollm2))
    assert report["initializers"] == 272 and report["nodes"] == 0
    assert report["metadata"]["general.architecture"] == "llama"
