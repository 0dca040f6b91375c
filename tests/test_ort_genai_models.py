"""Models written by onnxruntime-genai's model builder, run on the CPU backend against onnxruntime.

A small Llama (two layers, four query heads over two key/value heads, head size 16) with seeded
random weights is saved by transformers and built for the CPU at ``fp32`` and ``int4``, as the
builder's command line does with ``-p fp32 -e cpu`` and ``-p int4 -e cpu``. Both models hold
GroupQueryAttention (packed QKV, rotary embedding at positions taken from ``attention_mask``) and
SkipSimplifiedLayerNormalization; the ``int4`` one holds MatMulNBits at ``accuracy_level=4``. The
builder reads the checkpoint and a word-level tokenizer (which it insists on) from a local folder;
the network is closed while it runs.

Each model runs a prompt of two rows (empty caches), then a decoding step of both rows and a
chunk of three tokens of the first row after it (both runtimes take several new tokens after a
cache only in a batch of one), given onnxruntime's present caches of the prompt, so that
GroupQueryAttention's cache path sees the same input in both runtimes. Logits and present keys
and values must be within ``RTOL`` of the output's largest magnitude of onnxruntime's CPU
provider: float32 rounding through the network (measured: at most 4.8e-7 at ``fp32`` and 3.0e-7
at ``int4``, whose products of 8-bit activations and 4-bit weights are exact integers in both
runtimes).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import spawnml

builder = pytest.importorskip(
    "onnxruntime_genai.models.builder", reason="onnxruntime-genai's model builder is not installed"
)
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

#: Relative tolerance, of the output's largest magnitude (measured: at most 4.8e-7).
RTOL = 2e-6
VOCAB = 128
LAYERS = 2
KV_HEADS = 2
HEAD_SIZE = 16
BATCH = 2
PROMPT = 5
SEED = 0

Feeds = dict[str, np.ndarray]


def save_llama(folder: Path) -> None:
    """A small random Llama and a word-level tokenizer over its vocabulary, saved in ``folder``."""
    torch.manual_seed(SEED)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=KV_HEADS * 2 * HEAD_SIZE,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=2 * KV_HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=64,
    )
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    words = tokenizers.Tokenizer(tokenizers.models.WordLevel({f"w{i}": i for i in range(VOCAB)}, "w0"))
    words.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=words, unk_token="w0").save_pretrained(folder)


@contextlib.contextmanager
def network_closed() -> Iterator[None]:
    def refuse(*_: object) -> None:
        raise OSError("the model builder must not touch the network here")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        patch.setattr(socket.socket, "connect_ex", refuse)
        yield


def build(checkpoint: Path, precision: str, output: Path) -> Path:
    """The ``model.onnx`` the builder writes for ``precision`` on the CPU."""
    arguments = (None, str(checkpoint), str(output), precision, "cpu", str(output / "cache"))
    with network_closed():
        options = builder.parse_extra_options(*arguments, [])
        builder.create_model(*arguments, **options)
    return output / "model.onnx"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("llama")
    save_llama(folder)
    return folder


def step(tokens: np.ndarray, cache: Feeds) -> Feeds:
    """Feeds of ``tokens`` after ``cache`` (``past_key_values.*``), every position attended."""
    past = next(iter(cache.values())).shape[2]
    mask = np.ones((tokens.shape[0], past + tokens.shape[1]), np.int64)
    return {"input_ids": tokens, "attention_mask": mask, **cache}


def as_cache(names: list[str], outputs: list[np.ndarray]) -> Feeds:
    """The present keys and values of ``outputs`` as the next step's past."""
    return {
        name.replace("present.", "past_key_values."): value
        for name, value in zip(names, outputs, strict=True)
        if name.startswith("present.")
    }


def assert_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert (got.dtype, got.shape) == (want.dtype, want.shape), what
    difference = float(np.abs(got - want).max()) / float(np.abs(want).max())
    assert difference <= RTOL, f"{what}: {difference:.2g} of the largest magnitude"


@pytest.mark.parametrize("precision", ["fp32", "int4"])
def test_builder_model_matches_onnxruntime(checkpoint: Path, precision: str, tmp_path: Path) -> None:
    path = build(checkpoint, precision, tmp_path)
    ours = spawnml.InferenceSession(str(path), providers=["cpu"])
    theirs = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [output.name for output in theirs.get_outputs()]
    rng = np.random.default_rng(SEED)
    empty = np.zeros((BATCH, KV_HEADS, 0, HEAD_SIZE), np.float32)
    prompt = step(
        rng.integers(0, VOCAB, (BATCH, PROMPT)),
        {f"past_key_values.{layer}.{kind}": empty for layer in range(LAYERS) for kind in ("key", "value")},
    )
    cache = as_cache(names, theirs.run(None, prompt))
    steps = {
        "prompt": prompt,
        "decoding step": step(rng.integers(0, VOCAB, (BATCH, 1)), cache),
        # both runtimes take several new tokens after a cache only in a batch of one
        "chunk after the prompt": step(
            rng.integers(0, VOCAB, (1, 3)), {name: value[:1] for name, value in cache.items()}
        ),
    }
    for label, feeds in steps.items():
        for name, got, want in zip(names, ours.run(None, feeds), theirs.run(None, feeds), strict=True):
            assert_close(np.asarray(got), want, f"{precision}, {label}, {name}")
