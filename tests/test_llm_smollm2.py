"""SmolLM2-135M-Instruct (Q4_1 GGUF): SpawnML's llama port against transformers on the same file.

transformers (``from_pretrained(dir, gguf_file=...)``) dequantizes every weight to float32 as the
SpawnML graph does, so logits differ only by float32 rounding: stated tolerance 2e-3 absolute on
logits of magnitude ~20. The greedy tokens are checked twice: with teacher forcing (our argmax at
every position of the prompt + transformers' 32 greedy tokens is transformers' next token) for
three chat prompts, and by decoding through the KV cache, on float32 MatMul weights and on the
raw blocks under QuantizedMatMul. On WebGPU the quantized model is run with providers
["webgpu", "cpu"]: exactly the operators WebGPU alone refuses by name (the GGUF block operators
where the GPU has no kernel for them) go to the CPU, the rest (attention, rotary embedding,
normalization) to the GPU, with the same tolerance on the logits of the prompt and of 4 greedy
steps through the cache. The dequantized float32 model runs whole on WebGPU too, but a decode
step takes tens of seconds on a software Vulkan device. Streamed text is checked against
transformers' decoding of the same tokens.
Needs ``scripts/fetch-models smollm2-gguf``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from spawnml import InferenceSession
from spawnml_models.assets import asset_file
from spawnml_models.llm import TextGenerationPipeline
from spawnml_models.llm.cache import KVCache

from tests.backends import backend_or_skip, refused_operators
from tests.model_files import require

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

PROMPTS = ["What is the capital of France?", "Write a haiku about the sea.", "Explain gravity to a child."]
#: Raw prompts (no chat template) of several kinds, decoded by the default pipeline.
RAW_PROMPTS = {
    "prose": "The old lighthouse keeper climbed the stairs every evening, and",
    "code": 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "list": "Things to pack for a camping trip:\n1. Tent\n2.",
    "question": "Q: Why is the sky blue?\nA:",
    "french": "La tour Eiffel est située à Paris. Elle a été construite",
}
NEW_TOKENS = 32
STREAM_TOKENS = 16
GPU_TOKENS = 4
LOGITS_ATOL = 2e-3
TOKENIZER_STRINGS = [
    "Hello, world!",
    "The year 2024 had 366 days.",
    "<|im_start|>user\nHi there<|im_end|>\n",
    "naïve café — déjà vu 😀",
    "def f(x):\n    return x ** 2  # square",
    "   leading and trailing spaces   ",
]


@pytest.fixture(scope="module")
def smollm2() -> Path:
    return require(lambda: asset_file("smollm2-gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"))


@pytest.fixture(scope="module")
def reference(smollm2: Path) -> tuple[object, object]:
    """transformers' tokenizer and model, loaded from the GGUF file."""
    import torch
    import transformers

    directory, name = smollm2.parent, smollm2.name
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    return tokenizer, model.eval()


@pytest.fixture(scope="module")
def pipeline(smollm2: Path) -> TextGenerationPipeline:
    return TextGenerationPipeline(smollm2, dequantize=True)


@pytest.fixture(scope="module")
def default_pipeline(smollm2: Path) -> TextGenerationPipeline:
    """The pipeline as ``spawnml generate`` makes it: QuantizedMatMul on the raw blocks."""
    return TextGenerationPipeline(smollm2)


@pytest.fixture(scope="module")
def expected(reference: tuple[object, object]) -> list[tuple[list[int], list[int], np.ndarray]]:
    """Per prompt: the chat prompt's ids, transformers' greedy tokens (up to 32, ending at EOS),
    and its logits over both."""
    import torch

    tokenizer, model = reference
    cases = []
    for prompt in PROMPTS:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
        ids = tokenizer(text, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)
            logits = model(out).logits[0].numpy()
        cases.append((ids[0].tolist(), out[0, ids.shape[1] :].tolist(), logits))
    return cases


def test_tokenizer_matches_transformers(
    pipeline: TextGenerationPipeline, reference: tuple[object, object]
) -> None:
    tokenizer, _ = reference
    for text in TOKENIZER_STRINGS:
        ids = pipeline.tokenizer.encode(text)
        assert ids == tokenizer(text).input_ids, text
        assert pipeline.tokenizer.decode(ids) == tokenizer.decode(ids) == text


def test_chat_prompt_matches_transformers(
    pipeline: TextGenerationPipeline, reference: tuple[object, object]
) -> None:
    tokenizer, _ = reference
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    for conversation in (messages, messages[1:]):
        want = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
        assert pipeline.prompt(conversation) == want


def test_greedy_tokens_and_logits_match_transformers(
    pipeline: TextGenerationPipeline, expected: list
) -> None:
    for (prompt_ids, tokens, want), text in zip(expected, PROMPTS, strict=True):
        assert pipeline.tokenizer.encode(pipeline.prompt(text)) == prompt_ids
        logits = pipeline.forward(prompt_ids + tokens, KVCache(pipeline.config))
        np.testing.assert_allclose(logits, want, rtol=0, atol=LOGITS_ATOL, err_msg=text)
        assert logits[len(prompt_ids) - 1 : -1].argmax(-1).tolist() == tokens, text


def test_decoding_with_the_cache_matches_transformers(
    pipeline: TextGenerationPipeline, expected: list
) -> None:
    prompt_ids, tokens, _ = expected[0]
    eos = pipeline.tokenizer.eos_id
    assert list(pipeline.tokens(prompt_ids, NEW_TOKENS)) == [token for token in tokens if token != eos]
    assert pipeline.stats.prompt_tokens == len(prompt_ids) and pipeline.stats.decode_rate > 0


def test_quantized_blocks_match_dequantized_weights(
    smollm2: Path, pipeline: TextGenerationPipeline, expected: list
) -> None:
    """QuantizedMatMul on the raw Q4_1 / Q8_0 blocks: the same logits and greedy tokens."""
    quantized = TextGenerationPipeline(smollm2)
    prompt_ids, tokens, want = expected[1]
    logits = quantized.forward(prompt_ids, KVCache(quantized.config))
    np.testing.assert_allclose(logits, want[: len(prompt_ids)], rtol=0, atol=LOGITS_ATOL)
    assert list(quantized.tokens(prompt_ids, 8)) == [token for token in tokens[:8] if token != 2]


@pytest.mark.parametrize("kind", list(RAW_PROMPTS))
def test_default_pipeline_decodes_raw_prompts_as_transformers(
    default_pipeline: TextGenerationPipeline, reference: tuple[object, object], kind: str
) -> None:
    """The default pipeline (QuantizedMatMul on the repacked blocks through the KV cache): the
    same 32 greedy tokens as transformers on raw prompts of several kinds."""
    import torch

    tokenizer, model = reference
    text = RAW_PROMPTS[kind]
    ids = tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        want = model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)[0, ids.shape[1] :].tolist()
    pipeline = default_pipeline
    assert pipeline.tokenizer.encode(pipeline.prompt(text, raw=True)) == ids[0].tolist()
    eos = pipeline.tokenizer.eos_id
    until_eos = want[: want.index(eos)] if eos in want else want
    assert list(pipeline.tokens(ids[0].tolist(), NEW_TOKENS)) == until_eos, kind


def test_streamed_text_is_transformers_decoding_of_the_tokens(
    default_pipeline: TextGenerationPipeline, reference: tuple[object, object]
) -> None:
    """The pieces :meth:`stream` yields (through the tokenizer's streaming decoder) join to
    transformers' decoding of the generated tokens; a stop sequence ends the text before it."""
    tokenizer, _ = reference
    pipeline, text = default_pipeline, RAW_PROMPTS["french"]
    tokens = list(pipeline.tokens(pipeline.tokenizer.encode(text), STREAM_TOKENS))
    whole = tokenizer.decode(tokens)  # type: ignore[attr-defined]
    pieces = list(pipeline.stream(text, STREAM_TOKENS, raw=True))
    assert "".join(pieces) == whole and len(pieces) > 1
    stop = whole[len(whole) // 2 : len(whole) // 2 + 3]
    assert "".join(pipeline.stream(text, STREAM_TOKENS, stop=[stop], raw=True)) == whole[: whole.index(stop)]


def test_webgpu_with_the_cpu_after_it_matches_transformers(smollm2: Path, expected: list) -> None:
    """Logits of the prompt and of each greedy step through the cache, as transformers'."""
    backend_or_skip("webgpu")
    mixed = TextGenerationPipeline(smollm2, providers=["webgpu", "cpu"])
    refused = refused_operators(
        "webgpu", lambda providers: InferenceSession(mixed.session.graph, providers=providers)
    )
    placement = mixed.session.placement()
    assert {op for _, op, provider in placement if provider == "cpu"} == refused
    assert {"Attention", "RotaryEmbedding", "RMSNormalization"} <= {
        op for _, op, provider in placement if provider == "webgpu"
    }
    directions = {(t.source, t.target) for t in mixed.session.transfers()}
    assert directions == ({("webgpu", "cpu"), ("cpu", "webgpu")} if refused else set())
    prompt_ids, tokens, want = expected[0]
    cache = KVCache(mixed.config)
    logits = mixed.forward(prompt_ids, cache)
    np.testing.assert_allclose(logits, want[: len(prompt_ids)], rtol=0, atol=LOGITS_ATOL)
    for step, token in enumerate(tokens[:GPU_TOKENS]):
        assert logits[-1].argmax() == token
        logits = mixed.forward([token], cache)
        np.testing.assert_allclose(logits[-1], want[len(prompt_ids) + step], rtol=0, atol=LOGITS_ATOL)
