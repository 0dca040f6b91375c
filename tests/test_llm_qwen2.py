"""The qwen2 architecture of the GGUF text-generation port against transformers on the same file.

A small qwen2 model is written here with the ``gguf`` library: random float32 weights (Q, K and
V with biases, grouped-query attention, NeoX-style RoPE) and a byte-level BPE vocabulary with
Qwen2's pre-tokenizer. transformers loads the same file (``from_pretrained(dir, gguf_file=...)``),
so the tokenizer, the logits (float32 on both sides: 1e-4 absolute) and 32 greedy tokens decoded
through the KV cache are compared with a reference that shares no code with ours. On WebGPU the
whole decoder (attention, rotary embedding, RMS normalization and the KV cache) runs on the GPU
and is held to the same tolerance, with 8 greedy tokens.
"""

from __future__ import annotations

import collections
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
import transformers
from spawnml_models.llm import TextGenerationPipeline
from spawnml_models.llm.cache import KVCache

from tests.backends import backend_or_skip

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, CONTEXT = 64, 2, 4, 2, 128, 128
LOGITS_ATOL = 1e-4
NEW_TOKENS = 32
GPU_TOKENS = 8
TEXTS = ["the cat sat on the mat", "Hello, world! 123 apples", "line one\nline two\n\n  spaced  out"]
#: Merges of a toy vocabulary (byte-level spelling: "Ġ" is a space), applied in this order.
MERGES = [
    "t h",
    "th e",
    "Ġ the",
    "a t",
    "Ġ c",
    "Ġc at",
    "Ġ s",
    "Ġs at",
    "Ġ o",
    "Ġo n",
    "Ġ m",
    "Ġm at",
    "l l",
    "e ll",
]
END = "<|endoftext|>"


def byte_alphabet() -> list[str]:
    """GPT-2's byte-to-character table: printable bytes as themselves, the rest shifted past 255."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars, shift = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + shift)
            shift += 1
    return [chars[b] for b in range(256)]


def write_qwen2(path: Path) -> None:
    rng = np.random.default_rng(0)
    tokens = byte_alphabet() + ["".join(m.split(" ")) for m in MERGES] + [END]
    types = [1] * (len(tokens) - 1) + [3]
    vocab, head_dim = len(tokens), HIDDEN // HEADS
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(MERGES)
    writer.add_eos_token_id(vocab - 1)
    writer.add_bos_token_id(vocab - 1)
    writer.add_add_bos_token(False)

    def tensor(name: str, *shape: int, scale: float = 0.15) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    tensor("token_embd.weight", vocab, HIDDEN, scale=1.0)
    for layer in range(LAYERS):
        p = f"blk.{layer}."
        writer.add_tensor(p + "attn_norm.weight", (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
        writer.add_tensor(p + "ffn_norm.weight", (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
        for part, rows in (("q", HEADS * head_dim), ("k", KV_HEADS * head_dim), ("v", KV_HEADS * head_dim)):
            tensor(p + f"attn_{part}.weight", rows, HIDDEN)
            tensor(p + f"attn_{part}.bias", rows, scale=0.5)
        tensor(p + "attn_output.weight", HIDDEN, HEADS * head_dim)
        tensor(p + "ffn_gate.weight", FFN, HIDDEN)
        tensor(p + "ffn_up.weight", FFN, HIDDEN)
        tensor(p + "ffn_down.weight", HIDDEN, FFN)
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))
    head = (rng.standard_normal((vocab, HIDDEN)) * 0.15).astype(np.float32)
    head[-1] = 0  # the end token's logit stays 0, below the top one: 32 tokens are generated
    writer.add_tensor("output.weight", head)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("qwen2") / "tiny-qwen2.gguf"
    write_qwen2(path)
    return path


@pytest.fixture(scope="module")
def reference(model_file: Path) -> tuple[object, object]:
    directory, name = model_file.parent, model_file.name
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    return tokenizer, model.eval()


@pytest.fixture(scope="module")
def pipeline(model_file: Path) -> TextGenerationPipeline:
    return TextGenerationPipeline(model_file, providers=["cpu"])


def test_reads_the_qwen2_configuration(pipeline: TextGenerationPipeline) -> None:
    config = pipeline.config
    assert (config.layers, config.heads, config.kv_heads, config.head_dim) == (LAYERS, HEADS, KV_HEADS, 16)
    assert not config.rope_interleaved


def test_tokenizer_matches_transformers(pipeline: TextGenerationPipeline, reference: tuple) -> None:
    tokenizer, _ = reference
    for text in TEXTS:
        ids = pipeline.tokenizer.encode(text)
        assert ids == tokenizer(text).input_ids, text
        assert pipeline.tokenizer.decode(ids) == text


def assert_matches_transformers(
    pipeline: TextGenerationPipeline, reference: tuple, text: str, new_tokens: int
) -> None:
    """Logits over the prompt and transformers' greedy tokens, and the tokens decoded through the cache."""
    tokenizer, model = reference
    prompt = tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=new_tokens, do_sample=False)
        want = model(out).logits[0].numpy()
    prompt_ids, tokens = prompt[0].tolist(), out[0, prompt.shape[1] :].tolist()
    logits = pipeline.forward(prompt_ids + tokens, KVCache(pipeline.config))
    np.testing.assert_allclose(logits, want, rtol=0, atol=LOGITS_ATOL, err_msg=text)
    assert list(pipeline.tokens(prompt_ids, new_tokens)) == tokens, text
    assert len(tokens) == new_tokens


def test_logits_and_cached_greedy_tokens_match_transformers(
    pipeline: TextGenerationPipeline, reference: tuple
) -> None:
    for text in TEXTS:
        assert_matches_transformers(pipeline, reference, text, NEW_TOKENS)


def test_whole_decoder_on_webgpu_matches_transformers(model_file: Path, reference: tuple) -> None:
    backend_or_skip("webgpu")
    gpu = TextGenerationPipeline(model_file, providers=["webgpu"])
    placed = collections.Counter(provider for _, _, provider in gpu.session.placement())
    assert set(placed) == {"webgpu"}, placed
    assert_matches_transformers(gpu, reference, TEXTS[0], GPU_TOKENS)


def test_an_unknown_architecture_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gemma.gguf"
    writer = gguf.GGUFWriter(str(path), "mamba")
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(Exception, match="GGUF architecture 'mamba' is not supported"):
        TextGenerationPipeline(path)
