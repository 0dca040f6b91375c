"""The llama graph builder on a tiny random llama GGUF against a numpy reference forward.

The file is written as llama.cpp's converter writes one: Q and K rows permuted per head for
ggml's adjacent-pair RoPE, some weights Q8_0. The reference uses the unpermuted weights and
Hugging Face's rotate-half RoPE, so it also checks that the permutation is handled. Tolerance:
float32 rounding through 2 layers, 1e-4 absolute on logits of magnitude ~1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import spawnml
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import dequantize, quantize
from spawnml_models.llm import LlamaConfig, build_llama_graph
from spawnml_models.llm.cache import KVCache
from spawnml_models.llm.graph import past_names

LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, BASE, EPS = 2, 64, 4, 2, 96, 40, 10000.0, 1e-5
HEAD_DIM = HIDDEN // HEADS
QUANTIZED = ("ffn_down", "attn_output")  # stored Q8_0


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter: each head's rotate-half pairs (i, i + d/2) become rows (2i, 2i + 1)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    """A tiny llama GGUF with tied embeddings and the weights the reference uses (HF layout)."""
    rng = np.random.default_rng(0)
    weights = {"token_embd": rng.normal(0, 1, (VOCAB, HIDDEN)), "output_norm": 1 + rng.normal(0, 0.1, HIDDEN)}
    shapes = {"q": HIDDEN, "k": KV_HEADS * HEAD_DIM, "v": KV_HEADS * HEAD_DIM, "output": HIDDEN}
    for layer in range(LAYERS):
        p = f"blk.{layer}."
        for part, rows in shapes.items():
            cols = HIDDEN
            weights[p + f"attn_{part}"] = rng.normal(0, cols**-0.5, (rows, cols))
        weights[p + "ffn_gate"] = rng.normal(0, HIDDEN**-0.5, (FFN, HIDDEN))
        weights[p + "ffn_up"] = rng.normal(0, HIDDEN**-0.5, (FFN, HIDDEN))
        weights[p + "ffn_down"] = rng.normal(0, FFN**-0.5, (HIDDEN, FFN))
        weights[p + "attn_norm"] = 1 + rng.normal(0, 0.1, HIDDEN)
        weights[p + "ffn_norm"] = 1 + rng.normal(0, 0.1, HIDDEN)
    path = tmp_path_factory.mktemp("llama") / "tiny.gguf"
    writer = GGUFWriter(path, "llama")
    writer.add_block_count(LAYERS)
    writer.add_context_length(64)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(BASE)
    writer.add_layer_norm_rms_eps(EPS)
    reference = {}
    for name, value in weights.items():
        value = value.astype(np.float32)
        stored = value
        if name.endswith("attn_q"):
            stored = _permute(value, HEADS)
        elif name.endswith("attn_k"):
            stored = _permute(value, KV_HEADS)
        if name.split(".")[-1] in QUANTIZED:
            blocks = quantize(stored, GGMLQuantizationType.Q8_0)
            writer.add_tensor(name + ".weight", blocks, raw_dtype=GGMLQuantizationType.Q8_0)
            value = dequantize(blocks, GGMLQuantizationType.Q8_0)  # no permutation on these
        else:
            writer.add_tensor(name + ".weight", stored)
        reference[name] = value.astype(np.float64)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, reference


def _rms(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w


def _rope(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Hugging Face's llama RoPE: ``x * cos + rotate_half(x) * sin`` on ``[heads, seq, dim]``."""
    inv = BASE ** (-np.arange(0, HEAD_DIM, 2) / HEAD_DIM)
    angles = np.concatenate([np.outer(positions, inv)] * 2, axis=-1)
    half = HEAD_DIM // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * np.cos(angles) + rotated * np.sin(angles)


def reference_logits(w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """Float64 llama forward over ``ids`` (causal, grouped-query attention, tied head)."""
    x, seq, positions = w["token_embd"][ids], len(ids), np.arange(len(ids))
    for layer in range(LAYERS):
        p = f"blk.{layer}."
        h = _rms(x, w[p + "attn_norm"])
        q = (h @ w[p + "attn_q"].T).reshape(seq, HEADS, HEAD_DIM).transpose(1, 0, 2)
        k = (h @ w[p + "attn_k"].T).reshape(seq, KV_HEADS, HEAD_DIM).transpose(1, 0, 2)
        v = (h @ w[p + "attn_v"].T).reshape(seq, KV_HEADS, HEAD_DIM).transpose(1, 0, 2)
        q, k = _rope(q, positions), _rope(k, positions)
        k, v = (np.repeat(t, HEADS // KV_HEADS, axis=0) for t in (k, v))
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(HEAD_DIM) + np.triu(np.full((seq, seq), -np.inf), 1)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        x = x + (probs @ v).transpose(1, 0, 2).reshape(seq, HIDDEN) @ w[p + "attn_output"].T
        h = _rms(x, w[p + "ffn_norm"])
        gate, up = h @ w[p + "ffn_gate"].T, h @ w[p + "ffn_up"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "ffn_down"].T
    return _rms(x, w["output_norm"]) @ w["token_embd"].T


IDS = [3, 17, 5, 39, 0, 22, 8]


@pytest.mark.parametrize("dequantize_weights", [False, True])
def test_forward_matches_reference(
    tiny: tuple[Path, dict[str, np.ndarray]], dequantize_weights: bool
) -> None:
    path, weights = tiny
    graph = build_llama_graph(spawnml.load(path), dequantize=dequantize_weights)
    ops = {node.op_type for node in graph.nodes}
    assert ("QuantizedMatMul" in ops) != dequantize_weights
    config = LlamaConfig.from_metadata(graph.metadata)
    session = spawnml.InferenceSession(graph)
    feeds = {"input_ids": np.array([IDS]), "position_ids": np.arange(len(IDS))[None]}
    feeds |= {
        name: np.zeros((1, KV_HEADS, 0, HEAD_DIM), np.float32)
        for i in range(LAYERS)
        for name in past_names(i)
    }
    logits, present_key, *_ = session.run(None, feeds)
    assert config.heads == HEADS and config.kv_heads == KV_HEADS and present_key.shape == (1, 2, 7, HEAD_DIM)
    np.testing.assert_allclose(logits[0], reference_logits(weights, IDS), rtol=0, atol=1e-4)


def test_cached_decode_matches_full_forward(tiny: tuple[Path, dict[str, np.ndarray]]) -> None:
    """Prefill 4 tokens then feed 3 one at a time through the KV cache: the same logits."""
    path, weights = tiny
    graph = build_llama_graph(spawnml.load(path))
    session = spawnml.InferenceSession(graph)
    cache = KVCache(LlamaConfig.from_metadata(graph.metadata))
    rows = []
    for chunk in (IDS[:4], IDS[4:5], IDS[5:6], IDS[6:]):
        feeds = {
            "input_ids": np.array([chunk]),
            "position_ids": np.arange(cache.length, cache.length + len(chunk))[None],
            **cache.feeds(),
        }
        logits, *presents = session.run_with_tensors(["logits", *cache.output_names], feeds)
        assert all(isinstance(present, spawnml.Tensor) for present in presents)
        cache.update(presents, len(chunk))
        rows.append(logits.numpy()[0])
    assert cache.length == len(IDS)
    np.testing.assert_allclose(np.concatenate(rows), reference_logits(weights, IDS), rtol=0, atol=1e-4)
