"""Shared fixtures for the format loader tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from onnx import ModelProto
from spawnml import Limits
from spawnml.formats import ModelSource
from spawnml.ir import Graph
from spawnml.limits import check_graph
from spawnml.plugins import reset
from spawnml.plugins.manager import PLUGINS_ENV
from spawnml_formats.onnx.loader import ONNXLoader

LoadONNX = Callable[..., Graph]


@pytest.fixture
def load_onnx() -> LoadONNX:
    """Load a ModelProto, bytes or path with the ONNX loader, checked as ``spawnml.load`` checks."""

    def load(model: ModelProto | bytes | Path, limits: Limits | None = None) -> Graph:
        limits = limits or Limits()
        data = model.SerializeToString() if isinstance(model, ModelProto) else model
        graph = ONNXLoader().load(ModelSource.of(data), limits)
        check_graph(graph, limits)
        graph.toposort()
        return graph

    return load


@pytest.fixture
def onnx_plugin_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Load only this distribution's ONNX plugin (and core's built-ins) for the test."""
    monkeypatch.setenv(PLUGINS_ENV, "onnx")
    reset()
    yield
    reset()
