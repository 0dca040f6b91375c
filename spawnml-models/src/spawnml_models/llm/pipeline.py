"""Text generation with a llama or qwen2 GGUF model: chat prompt, prefill, then decode with a KV cache."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import spawnml
from spawnml import InvalidArgumentError

from ..assets import asset_file
from .cache import KVCache
from .chat import ChatTemplate, Message
from .config import LlamaConfig
from .graph import build_llama_graph
from .sampling import Sampler
from .tokenizer import tokenizer_from_gguf

MODEL_ASSET, MODEL_FILE = "smollm2-gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class GenerationStats:
    """Token counts and timings of the latest generation."""

    prompt_tokens: int = 0
    generated_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0

    @property
    def prefill_rate(self) -> float:
        """Prompt tokens per second."""
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds else 0.0

    @property
    def decode_rate(self) -> float:
        """Generated tokens per second after the first, which the prefill produces."""
        steps = self.generated_tokens - 1
        return steps / self.decode_seconds if steps > 0 and self.decode_seconds else 0.0


class TextGenerationPipeline:
    """Generate text with a llama or qwen2 GGUF model (SmolLM2-135M-Instruct by default).

    ``dequantize`` expands quantized weights to float32 at load (see :func:`build_llama_graph`).
    """

    def __init__(
        self,
        model: str | Path | None = None,
        providers: Sequence[str] | None = None,
        dequantize: bool = False,
    ) -> None:
        path = model if model is not None else asset_file(MODEL_ASSET, MODEL_FILE)
        weights = spawnml.load(os.fspath(path))
        self.config = LlamaConfig.from_metadata(weights.metadata)
        self.tokenizer = tokenizer_from_gguf(weights.metadata)
        template = weights.metadata.get("tokenizer.chat_template")
        bos, eos = (
            self.tokenizer.token(i) if i is not None else ""
            for i in (self.tokenizer.bos_id, self.tokenizer.eos_id)
        )
        self.chat_template = ChatTemplate(template, bos, eos) if template else None
        self.session = spawnml.InferenceSession(build_llama_graph(weights, dequantize), providers=providers)
        self.stats = GenerationStats()

    def prompt(self, text: str | Sequence[Message], raw: bool = False) -> str:
        """The model's input text: ``text`` as a user message in the chat template, or as it is
        when ``raw`` or the model has no template. A list of messages is always templated."""
        if isinstance(text, str) and (raw or self.chat_template is None):
            return text
        if self.chat_template is None:
            raise InvalidArgumentError("the model has no chat template; pass the prompt as raw text")
        messages = [{"role": "user", "content": text}] if isinstance(text, str) else list(text)
        return self.chat_template.render(messages)

    def forward(self, ids: Sequence[int], cache: KVCache) -> np.ndarray:
        """Logits ``[len(ids), vocab]`` of ``ids`` following the tokens already in ``cache``, which
        takes their keys and values."""
        positions = np.arange(cache.length, cache.length + len(ids), dtype=np.int64)[None]
        feeds = {"input_ids": np.asarray(ids, np.int64)[None], "position_ids": positions, **cache.feeds()}
        outputs = self.session.run_with_tensors(["logits", *cache.output_names], feeds)
        logits, *presents = cast("list[spawnml.Tensor]", outputs)
        cache.update(presents, len(ids))
        return np.asarray(logits.numpy())[0]

    def tokens(
        self, prompt_ids: Sequence[int], max_tokens: int, sampler: Sampler | None = None
    ) -> Iterator[int]:
        """Generated token ids, one at a time, until ``max_tokens`` or the end-of-sequence token."""
        if not prompt_ids:
            raise InvalidArgumentError("the prompt has no tokens")
        if len(prompt_ids) + max_tokens > self.config.context_length:
            raise InvalidArgumentError(
                f"{len(prompt_ids)} prompt tokens + {max_tokens} new ones exceed the context of "
                f"{self.config.context_length}"
            )
        sampler = sampler or Sampler()
        self.stats = stats = GenerationStats(prompt_tokens=len(prompt_ids))
        cache = KVCache(self.config)
        start = time.perf_counter()
        logits = self.forward(prompt_ids, cache)[-1]
        stats.prefill_seconds = time.perf_counter() - start
        for _ in range(max_tokens):
            token = sampler(logits)
            if token == self.tokenizer.eos_id:
                return
            stats.generated_tokens += 1
            stats.decode_seconds = time.perf_counter() - start - stats.prefill_seconds
            yield token
            if stats.generated_tokens < max_tokens:
                logits = self.forward([token], cache)[-1]

    def stream(
        self,
        prompt: str | Sequence[Message],
        max_tokens: int = 128,
        sampler: Sampler | None = None,
        stop: Sequence[str] = (),
        raw: bool = False,
    ) -> Iterator[str]:
        """The generated text in pieces as tokens arrive, ending before any ``stop`` sequence.

        Tokens become text through the tokenizer's streaming decoder, which holds back a
        character split across tokens until its last byte arrives."""
        ids = self.tokenizer.encode(self.prompt(prompt, raw))
        pieces = self.tokenizer.decode_stream()
        text, sent = "", 0
        for token in self.tokens(ids, max_tokens, sampler):
            piece = pieces.step(self.tokenizer.tokenizer, token)
            if piece is None:
                continue
            text += piece
            cut = min((text.find(s) for s in stop if s in text), default=-1)
            if cut >= 0:
                yield text[sent:cut]
                return
            ready = len(text) - _held_back(text, stop)
            if ready > sent:
                yield text[sent:ready]
                sent = ready
        if len(text) > sent:
            yield text[sent:]

    def __call__(
        self,
        prompt: str | Sequence[Message],
        max_tokens: int = 128,
        sampler: Sampler | None = None,
        stop: Sequence[str] = (),
        raw: bool = False,
    ) -> str:
        """The generated text for ``prompt``."""
        return "".join(self.stream(prompt, max_tokens, sampler, stop, raw))


def _held_back(text: str, stop: Sequence[str]) -> int:
    """How many characters at the end of ``text`` may begin a stop sequence."""
    return max((n for s in stop for n in range(len(s) - 1, 0, -1) if text.endswith(s[:n])), default=0)
