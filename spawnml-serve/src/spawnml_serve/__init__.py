"""HTTP serving of SpawnML models: OpenAI-compatible ``/v1`` and KServe v2 ``/v2`` endpoints on
Starlette and uvicorn (``spawnml serve``), with bounded queues, dynamic batching and metrics."""

from __future__ import annotations

from .config import ServeConfig
from .served import ChatModel, EmbeddingModel, GraphModel, load_served_model

__all__ = ["ChatModel", "EmbeddingModel", "GraphModel", "ServeConfig", "create_app", "load_served_model"]


def __getattr__(name: str) -> object:
    if name == "create_app":  # Starlette is imported when an application is made
        from .app import create_app

        return create_app
    raise AttributeError(name)
