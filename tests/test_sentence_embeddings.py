"""all-MiniLM-L6-v2 sentence embeddings on SpawnML against onnxruntime running the same ONNX file.

The reference embeds one sentence at a time (no padding), truncates by hand and pools in
plain numpy, so the pipeline's batching, padding, masking and truncation are all checked.
Needs ``scripts/fetch-models``; skips without the files unless ``SPAWNML_REQUIRE_MODELS=1``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from spawnml_models.assets import asset_file
from spawnml_models.commands import DEMO_SENTENCES
from spawnml_models.embeddings import (
    MAX_SEQ_LENGTH,
    MODEL_ASSET,
    TOKENIZER_ASSET,
    SentenceEmbeddingPipeline,
    load_tokenizer,
)
from tokenizers import Tokenizer

from tests.backends import backend_or_skip
from tests.model_files import require

pytestmark = pytest.mark.real_model

SENTENCES = [
    "Hi.",
    "A man is playing a guitar.",
    "The quick brown fox jumps over the lazy dog while the cat watches from the warm windowsill.",
    "Nothing is downloaded at run time: model files come from pinned wheels, checked by sha256.",
    "Ünïcödé, punctuation (and) numbers like 3.14159 go through WordPiece too!",
    " ".join(f"word{i}" for i in range(200)),  # far more than MAX_SEQ_LENGTH tokens: truncated
]


@pytest.fixture(scope="module")
def model() -> Path:
    return require(lambda: asset_file(MODEL_ASSET, "model.onnx"))


@pytest.fixture(scope="module")
def tokenizer() -> Path:
    return require(lambda: asset_file(TOKENIZER_ASSET, "tokenizer.json"))


@pytest.fixture(scope="module")
def pipeline(model, tokenizer) -> SentenceEmbeddingPipeline:
    return SentenceEmbeddingPipeline(model, tokenizer, providers=["cpu"])


def reference_embeddings(model: Path, tokenizer: Path, sentences: list[str]) -> np.ndarray:
    """onnxruntime, one sentence at a time: mean of the token states, scaled to unit length."""
    wordpiece = Tokenizer.from_file(str(tokenizer))
    wordpiece.no_truncation()
    wordpiece.no_padding()
    sep = wordpiece.token_to_id("[SEP]")
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    rows = []
    for sentence in sentences:
        ids = wordpiece.encode(sentence).ids
        if len(ids) > MAX_SEQ_LENGTH:
            ids = [*ids[: MAX_SEQ_LENGTH - 1], sep]
        input_ids = np.array([ids], dtype=np.int64)
        feeds = {
            "input_ids": input_ids,
            "attention_mask": np.ones_like(input_ids),
            "token_type_ids": np.zeros_like(input_ids),
        }
        (hidden,) = session.run(None, feeds)
        mean = hidden[0].astype(np.float64).mean(axis=0)
        rows.append(mean / np.linalg.norm(mean))
    return np.stack(rows)


@pytest.mark.parametrize("batch_size", [1, 2, 32])
def test_embeddings_match_onnxruntime(pipeline, model, tokenizer, batch_size):
    want = reference_embeddings(model, tokenizer, SENTENCES)
    got = pipeline(SENTENCES, batch_size=batch_size)
    assert got.shape == (len(SENTENCES), 384) and got.dtype == np.float32
    assert np.abs(got - want).max() <= 1e-4


def test_single_sentence_gives_a_vector(pipeline, model, tokenizer):
    want = reference_embeddings(model, tokenizer, SENTENCES[1:2])[0]
    got = pipeline(SENTENCES[1])
    assert got.shape == (384,)
    assert np.abs(got - want).max() <= 1e-4


def test_similarity_is_symmetric_with_unit_diagonal(pipeline):
    matrix = pipeline.similarity([*DEMO_SENTENCES, *SENTENCES])
    assert matrix.shape == (len(DEMO_SENTENCES) + len(SENTENCES),) * 2
    np.testing.assert_allclose(matrix, matrix.T, atol=1e-6)
    np.testing.assert_allclose(np.diag(matrix), 1.0, atol=1e-5)
    guitar, strumming, market, prices = range(4)
    assert min(matrix[guitar, strumming], matrix[market, prices]) > 0.5
    assert max(matrix[guitar, market], matrix[strumming, prices]) < 0.2


def test_tokenization_follows_the_sentence_transformers_config(tokenizer):
    bert = json.loads(require(lambda: asset_file(TOKENIZER_ASSET, "sentence_bert_config.json")).read_text())
    pooling = json.loads(require(lambda: asset_file(TOKENIZER_ASSET, "1_Pooling/config.json")).read_text())
    assert bert["max_seq_length"] == MAX_SEQ_LENGTH
    assert pooling["pooling_mode_mean_tokens"] and not pooling["pooling_mode_cls_token"]
    wordpiece = load_tokenizer(tokenizer)
    assert wordpiece.encode("Hello, World!").ids == [101, 7592, 1010, 2088, 999, 102]
    assert len(wordpiece.encode(SENTENCES[-1]).ids) == MAX_SEQ_LENGTH
    batch = wordpiece.encode_batch(["Hi.", "Hello, World!"])
    assert [encoding.attention_mask for encoding in batch] == [[1, 1, 1, 1, 0, 0], [1] * 6]


def test_whole_pipeline_on_webgpu_matches_onnxruntime(model, tokenizer):
    """The int8 MiniLM runs on the GPU alone (no CPU node), within the CPU pipeline's tolerance.

    Short sentences only: on a software Vulkan device the 256-token one takes minutes."""
    backend_or_skip("webgpu")
    gpu = SentenceEmbeddingPipeline(model, tokenizer, providers=["webgpu"])
    assert {provider for _, _, provider in gpu.session.placement()} == {"webgpu"}
    want = reference_embeddings(model, tokenizer, SENTENCES[:3])
    assert np.abs(gpu(SENTENCES[:3]) - want).max() <= 1e-4
