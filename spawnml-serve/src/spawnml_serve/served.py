"""The models a server holds: chat (GGUF language models), embeddings, and any graph model."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import spawnml
from spawnml.errors import InvalidArgumentError
from spawnml.plugins import models


@dataclass
class Generation:
    """What a generation used and why it ended, known once its last piece is out."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    tokens_per_second: float = 0.0


@dataclass
class ChatModel:
    """A text-generation pipeline; one generation at a time (the pipeline keeps per-run state)."""

    name: str
    pipeline: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    kind = "text-generation"

    def generate(
        self,
        prompt: str | Sequence[dict[str, str]],
        max_tokens: int,
        sampler: Any,
        stop: Sequence[str],
        raw: bool,
        cancelled: threading.Event,
        generation: Generation,
    ) -> Iterator[str]:
        """The text in pieces, ``generation`` filled in at the end; stops early once ``cancelled``
        is set (the client left, or its time ran out)."""
        with self.lock:
            for piece in self.pipeline.stream(prompt, max_tokens, sampler, stop, raw):
                if cancelled.is_set():
                    return
                yield piece
            stats = self.pipeline.stats
            generation.prompt_tokens = stats.prompt_tokens
            generation.completion_tokens = stats.generated_tokens
            generation.tokens_per_second = stats.decode_rate
            generation.finish_reason = "length" if stats.generated_tokens >= max_tokens else "stop"


@dataclass
class EmbeddingModel:
    """A sentence-embedding pipeline: unit-length vectors, batched across requests."""

    name: str
    pipeline: Any
    kind = "sentence-embedding"

    def embed(self, sentences: list[str]) -> np.ndarray:
        return np.asarray(self.pipeline(sentences), dtype=np.float32)

    def token_count(self, sentences: Sequence[str]) -> int:
        return sum(len(encoding.ids) for encoding in self.pipeline.tokenizer.encode_batch(list(sentences)))


@dataclass
class GraphModel:
    """Any model file SpawnML loads, served through the KServe v2 protocol."""

    name: str
    session: spawnml.InferenceSession
    kind = "graph"

    @property
    def batchable(self) -> bool:
        """Whether requests may be stacked on a first dimension every input leaves open."""
        inputs = self.session.get_inputs()
        return bool(inputs) and all(arg.shape and not isinstance(arg.shape[0], int) for arg in inputs)

    def run(self, outputs: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(value) for value in self.session.run(outputs, feeds)]


ServedModel = ChatModel | EmbeddingModel | GraphModel


def load_served_model(spec: str, providers: Sequence[str] | None = None) -> ServedModel:
    """``[NAME=]SOURCE``: a registered pipeline name (text generation or sentence embeddings), a
    GGUF language model file, or any other model file SpawnML loads (served as a graph model)."""
    name, separator, source = spec.partition("=")
    if not separator:
        name, source = "", spec
    registered = models().get(source)
    if registered is not None:
        return _pipeline_model(name or source, registered, providers)
    path = Path(source)
    if not path.exists():
        raise InvalidArgumentError(
            f"{source!r} is neither a registered model ({', '.join(sorted(models()))}) nor a file"
        )
    name = name or path.stem
    if path.suffix == ".gguf":
        from spawnml_models.llm import TextGenerationPipeline

        return ChatModel(name, TextGenerationPipeline(path, providers=providers))
    return GraphModel(name, spawnml.InferenceSession(str(path), providers=providers))


def _pipeline_model(name: str, registered: Any, providers: Sequence[str] | None) -> ServedModel:
    if registered.task == "text-generation":
        return ChatModel(name, registered(providers=providers))
    if registered.task == "sentence-embedding":
        return EmbeddingModel(name, registered(providers=providers))
    raise InvalidArgumentError(
        f"model {registered.name!r} ({registered.task}) is not served over HTTP: serve text-generation "
        "and sentence-embedding models by name, or any model file as a graph model"
    )
