"""SpawnML model ports and task pipelines."""

from __future__ import annotations

from .assets import MissingAssetError
from .embeddings import SentenceEmbeddingPipeline

__all__ = ["MissingAssetError", "SentenceEmbeddingPipeline"]
