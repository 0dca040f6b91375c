"""Sentence embeddings with all-MiniLM-L6-v2: tokenize, encode, mean-pool, normalize."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import spawnml
from spawnml import InvalidArgumentError

from .assets import asset_file
from .bert import WEIGHTS_ASSET, BertConfig, bert_graph

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

MODEL_ASSET = "minilm-onnx-int8"
TOKENIZER_ASSET = "minilm-tokenizer"
#: ``max_seq_length`` of the model's sentence_bert_config.json: longer inputs are truncated.
MAX_SEQ_LENGTH = 256
#: The int64 inputs a BERT encoder may declare -> the ``tokenizers.Encoding`` field each comes from.
FEEDS = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}


class SentenceEmbeddingPipeline:
    """Unit-length sentence embeddings, as sentence-transformers' ``encode(normalize_embeddings=True)``.

    ``model`` is a BERT encoder: an ONNX graph whose first output is the last hidden state, or
    SafeTensors weights with their ``config.json`` beside them, run through the BERT port
    (:mod:`spawnml_models.bert`). ``tokenizer`` is a ``tokenizer.json``. Both default to the
    cached all-MiniLM-L6-v2 assets (the int8 ONNX export).
    """

    def __init__(
        self,
        model: str | Path | None = None,
        tokenizer: str | Path | None = None,
        providers: Sequence[str] | None = None,
        max_length: int = MAX_SEQ_LENGTH,
    ) -> None:
        model = model if model is not None else asset_file(MODEL_ASSET, "model.onnx")
        tokenizer = tokenizer if tokenizer is not None else asset_file(TOKENIZER_ASSET, "tokenizer.json")
        self.tokenizer = load_tokenizer(tokenizer, max_length)
        self.session = encoder_session(model, providers)
        self.input_names = [value.name for value in self.session.get_inputs()]
        unknown = sorted(set(self.input_names) - FEEDS.keys())
        if unknown:
            raise InvalidArgumentError(
                f"model {model} takes inputs {unknown}; a BERT encoder takes only {list(FEEDS)}"
            )

    def __call__(self, sentences: str | Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Float32 embeddings, one unit-length row per sentence (a vector for a single string)."""
        if isinstance(sentences, str):
            return self([sentences], batch_size)[0]
        sentences = list(sentences)
        if not sentences:
            raise InvalidArgumentError("no sentences to embed")
        if batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be at least 1, not {batch_size}")
        order = np.argsort([-len(sentence) for sentence in sentences], kind="stable")  # less padding
        by_length = np.concatenate(
            [
                self._embed([sentences[i] for i in order[start : start + batch_size]])
                for start in range(0, len(sentences), batch_size)
            ]
        )
        embeddings = np.empty_like(by_length)
        embeddings[order] = by_length
        return embeddings

    def similarity(self, sentences: Sequence[str]) -> np.ndarray:
        """Cosine similarity of every pair of ``sentences``: a symmetric (n, n) matrix."""
        embeddings = self(sentences)
        return embeddings @ embeddings.T

    def _embed(self, sentences: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(sentences)
        feeds = {name: _column(encodings, FEEDS[name]) for name in self.input_names}
        hidden = np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)
        return normalize(mean_pool(hidden, _column(encodings, "attention_mask")))


def minilm_from_safetensors(**kwargs: Any) -> SentenceEmbeddingPipeline:
    """all-MiniLM-L6-v2 from its float32 SafeTensors weights, run through the BERT port."""
    return SentenceEmbeddingPipeline(model=asset_file(WEIGHTS_ASSET, "model.safetensors"), **kwargs)


def encoder_session(model: str | Path, providers: Sequence[str] | None = None) -> spawnml.InferenceSession:
    """A session over ``model``: its graph as is, or, for a weights-only file (SafeTensors), the BERT
    port built from the weights and the ``config.json`` in the same folder."""
    graph = spawnml.load(os.fspath(model))
    if not graph.nodes:
        config = Path(model).with_name("config.json")
        if not config.is_file():
            raise InvalidArgumentError(
                f"{model} holds weights only; the BERT port needs its config.json beside it ({config})"
            )
        graph = bert_graph(BertConfig.from_file(config), graph.initializers)
    return spawnml.InferenceSession(graph, providers=providers)


def load_tokenizer(path: str | Path, max_length: int = MAX_SEQ_LENGTH) -> Tokenizer:
    """A ``tokenizer.json`` set up as sentence-transformers runs it: truncated, padded to the longest."""
    from tokenizers import Tokenizer  # imported when the pipeline runs, not when it is registered

    tokenizer = Tokenizer.from_file(os.fspath(path))
    padding = tokenizer.padding or {}
    tokenizer.enable_truncation(max_length)
    tokenizer.enable_padding(
        pad_id=padding.get("pad_id", 0),
        pad_type_id=padding.get("pad_type_id", 0),
        pad_token=padding.get("pad_token", "[PAD]"),
    )
    return tokenizer


def mean_pool(token_embeddings: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Mean of each sequence's token embeddings over the tokens its attention mask keeps."""
    mask = attention_mask[..., None].astype(token_embeddings.dtype)
    return (token_embeddings * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)


def normalize(embeddings: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (rows of zeros stay zero)."""
    return embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)


def _column(encodings: list[Encoding], field: str) -> np.ndarray:
    return np.array([getattr(encoding, field) for encoding in encodings], dtype=np.int64)
