"""Bounds on untrusted model files, checked at load with a clear :class:`ModelLimitError`."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from .errors import ModelLimitError
from .ir import Graph

GIB = 1 << 30


@dataclass(frozen=True)
class Limits:
    """What a model file may ask for. Pass a custom instance to trust bigger files."""

    max_file_bytes: int = 16 * GIB
    max_nodes: int = 1_000_000
    max_rank: int = 32
    max_tensor_elements: int = 1 << 33
    max_total_elements: int = 1 << 35
    max_string_length: int = 1 << 20
    max_subgraph_depth: int = 16
    #: Iterations of one Loop node per run; counted as the loop runs, since its trip count and
    #: condition may be computed.
    max_loop_iterations: int = 1_000_000

    def check(self, what: str, value: int, limit: int, where: str = "") -> None:
        """Raise :class:`ModelLimitError` when ``value`` exceeds ``limit``."""
        if value > limit:
            raise ModelLimitError(what, value, limit, where)

    def check_shape(self, shape: tuple[int, ...], where: str) -> int:
        """Check a concrete shape's rank and element count; returns the element count."""
        self.check("rank", len(shape), self.max_rank, where)
        if any(dim < 0 for dim in shape):
            raise ModelLimitError("negative dimension", min(shape), 0, where)
        elements = math.prod(shape)
        self.check("tensor elements", elements, self.max_tensor_elements, where)
        return elements


DEFAULT_LIMITS = Limits()

_RUN_LIMITS: ContextVar[Limits] = ContextVar("spawnml_run_limits", default=DEFAULT_LIMITS)


def run_limits() -> Limits:
    """The limits that bound work while a model runs: those of :func:`limits_for_runs`, or the defaults."""
    return _RUN_LIMITS.get()


@contextmanager
def limits_for_runs(limits: Limits) -> Iterator[None]:
    """Bound the runs made in this context (this thread or task only) by ``limits``."""
    token = _RUN_LIMITS.set(limits)
    try:
        yield
    finally:
        _RUN_LIMITS.reset(token)


def check_graph(graph: Graph, limits: Limits) -> None:
    """Check a loaded graph against ``limits``: nodes, ranks, elements, strings, depth."""
    total = 0
    nodes = 0
    for node, depth in graph.walk():
        nodes += 1
        limits.check("subgraph depth", depth, limits.max_subgraph_depth, f"node {node.label()!r}")
        for attr, value in node.attrs.items():
            if isinstance(value, np.ndarray):
                total += _check_array(value, limits, f"attribute {attr!r} of node {node.label()!r}")
            elif isinstance(value, str | bytes):
                limits.check(
                    "string length",
                    len(value),
                    limits.max_string_length,
                    f"attribute {attr!r} of node {node.label()!r}",
                )
    limits.check("node count", nodes, limits.max_nodes)
    for body in _graphs(graph):
        for value in (*body.inputs, *body.outputs, *body.value_info.values()):
            if value.shape is not None:
                limits.check("rank", len(value.shape), limits.max_rank, f"value {value.name!r}")
        for name, array in body.initializers.items():
            total += _check_array(array, limits, f"initializer {name!r}")
    limits.check("total elements", total, limits.max_total_elements)


def _check_array(array: np.ndarray, limits: Limits, where: str) -> int:
    elements = limits.check_shape(array.shape, where)
    if array.dtype == object:
        longest = max((len(item) for item in array.flat), default=0)
        limits.check("string length", longest, limits.max_string_length, where)
    return elements


def _graphs(graph: Graph):
    yield graph
    for node in graph.nodes:
        for body in node.subgraphs():
            yield from _graphs(body)
