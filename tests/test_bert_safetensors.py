"""The BERT port (spawnml_models.bert) on all-MiniLM-L6-v2 SafeTensors weights.

Checked against a torch forward pass written from torch ops on the same weights, and
against the ONNX MiniLM pipeline. Needs ``scripts/fetch-models minilm-safetensors
minilm-tokenizer minilm-onnx-int8``; skips without the files unless ``SPAWNML_REQUIRE_MODELS=1``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import safetensors.torch as safetensors_torch
import spawnml
import spawnml.plugins
import torch
from spawnml_models.assets import asset_file
from spawnml_models.bert import WEIGHTS_ASSET, BertConfig, load_bert
from spawnml_models.embeddings import (
    MODEL_ASSET,
    TOKENIZER_ASSET,
    SentenceEmbeddingPipeline,
    load_tokenizer,
    mean_pool,
    normalize,
)

from tests.backends import backend_or_skip
from tests.model_files import require

pytestmark = pytest.mark.real_model

SENTENCES = [
    "Hi.",
    "A man is playing a guitar.",
    "The quick brown fox jumps over the lazy dog while the cat watches from the warm windowsill.",
    "Ünïcödé, punctuation (and) numbers like 3.14159 go through WordPiece too!",
]
#: float32 on both sides, different summation orders: agreement to rounding error.
TORCH_HIDDEN_ATOL = 2e-5
TORCH_EMBEDDING_ATOL = 2e-6
#: The ONNX file's weights are int8-quantized then cast to float, so it is a slightly different
#: model: its embeddings agree only to the quantization error, measured as cosine similarity.
ONNX_MIN_COSINE = 0.99


@pytest.fixture(scope="module")
def files():
    weights = require(lambda: asset_file(WEIGHTS_ASSET, "model.safetensors"))
    config = require(lambda: asset_file(WEIGHTS_ASSET, "config.json"))
    tokenizer = require(lambda: asset_file(TOKENIZER_ASSET, "tokenizer.json"))
    return weights, config, tokenizer


@pytest.fixture(scope="module")
def feeds(files):
    encodings = load_tokenizer(files[2]).encode_batch(SENTENCES)
    column = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
    return {
        name: np.array([getattr(e, field) for e in encodings], dtype=np.int64)
        for name, field in column.items()
    }


@pytest.fixture(scope="module")
def hidden(files, feeds):
    session = load_bert(files[0], files[1], providers=["cpu"])
    return np.asarray(session.run(None, feeds)[0])


def torch_bert(weights_path, config: BertConfig, feeds) -> np.ndarray:
    """BertModel's forward pass in torch ops: the reference for the port."""
    w = safetensors_torch.load_file(weights_path)
    ids, mask, types = (
        torch.from_numpy(feeds[name]) for name in ("input_ids", "attention_mask", "token_type_ids")
    )
    hidden, heads = config.hidden_size, config.num_attention_heads
    eps = config.layer_norm_eps

    def norm(x, prefix):
        return torch.nn.functional.layer_norm(x, (hidden,), w[f"{prefix}.weight"], w[f"{prefix}.bias"], eps)

    def linear(x, prefix):
        return torch.nn.functional.linear(x, w[f"{prefix}.weight"], w[f"{prefix}.bias"])

    positions = torch.arange(ids.shape[1])
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][types]
    x = norm(x + w["embeddings.position_embeddings.weight"][positions], "embeddings.LayerNorm")
    bias = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    batch, length = ids.shape
    for layer in range(config.num_hidden_layers):
        p = f"encoder.layer.{layer}"
        q, k, v = (
            linear(x, f"{p}.attention.self.{n}").view(batch, length, heads, -1).transpose(1, 2)
            for n in ("query", "key", "value")
        )
        scores = q @ k.transpose(-1, -2) / math.sqrt(hidden // heads) + bias
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, length, hidden)
        x = norm(linear(context, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        inner = torch.nn.functional.gelu(linear(x, f"{p}.intermediate.dense"), approximate="none")
        x = norm(linear(inner, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    return x.numpy()


def test_hidden_states_match_torch(files, feeds, hidden):
    want = torch_bert(files[0], BertConfig.from_file(files[1]), feeds)
    assert hidden.shape == want.shape == (len(SENTENCES), feeds["input_ids"].shape[1], 384)
    kept = feeds["attention_mask"].astype(bool)  # padded positions carry no meaning
    assert np.abs(hidden[kept] - want[kept]).max() <= TORCH_HIDDEN_ATOL
    got = normalize(mean_pool(hidden, feeds["attention_mask"]))
    ref = normalize(mean_pool(want, feeds["attention_mask"]))
    assert np.abs(got - ref).max() <= TORCH_EMBEDDING_ATOL


def test_sentence_embeddings_match_the_onnx_pipeline(files, feeds, hidden):
    onnx_model = require(lambda: asset_file(MODEL_ASSET, "model.onnx"))
    want = SentenceEmbeddingPipeline(onnx_model, files[2], providers=["cpu"])(SENTENCES)
    got = normalize(mean_pool(hidden, feeds["attention_mask"]))
    cosines = (got * want).sum(axis=1)
    assert cosines.min() >= ONNX_MIN_COSINE, cosines
    # and the two models rank sentence pairs alike
    np.testing.assert_array_equal(np.argsort(got @ got.T, axis=1), np.argsort(want @ want.T, axis=1))


@pytest.mark.parametrize("backend", ["cpu", "webgpu"])
def test_registered_safetensors_pipeline_matches_torch(files, feeds, backend):
    """``spawnml.models()`` builds the SafeTensors pipeline on ``backend``; its embeddings are torch's.

    The GPU sums in another order than numpy: 1e-5 there, 2e-6 on the CPU.
    """
    backend_or_skip(backend)
    pipeline = spawnml.plugins.models()["all-minilm-l6-v2-safetensors"](providers=[backend])
    assert {provider for _, _, provider in pipeline.session.placement()} == {backend}
    want = torch_bert(files[0], BertConfig.from_file(files[1]), feeds)
    ref = normalize(mean_pool(want, feeds["attention_mask"]))
    atol = TORCH_EMBEDDING_ATOL if backend == "cpu" else 1e-5
    assert np.abs(pipeline(SENTENCES) - ref).max() <= atol
