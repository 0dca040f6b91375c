"""Load-time checks and small helpers shared by the kernel families.

A check returns why a node cannot run on the CPU (the node is then refused at load),
or None when it can.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np
from spawnml.backend import CheckFn, KernelContext
from spawnml.errors import SpawnMLError
from spawnml.ir import Graph, Node
from spawnml.ops.shapes import as_text


def one_of(attr: str, default: str, allowed: Collection[str] | Callable[[int], Collection[str]]) -> CheckFn:
    """Refuse nodes whose string attribute is not in ``allowed`` (or ``allowed(opset)``)."""

    def check(node: Node, opset: int) -> str | None:
        value = as_text(node.attrs.get(attr, default))
        choices = allowed(opset) if callable(allowed) else allowed
        if value in choices:
            return None
        return f"{attr}={value!r} is not one of {sorted(choices)} at opset {opset}"

    return check


def valid_when(validate: Callable[[Node], object]) -> CheckFn:
    """Refuse nodes for which ``validate`` raises, with its message."""

    def check(node: Node, opset: int) -> str | None:
        try:
            validate(node)
        except SpawnMLError as error:
            return str(error)
        return None

    return check


def scalar(array: np.ndarray | None) -> int:
    """The one value of a scalar or one-element input, as an int."""
    if array is None:
        raise ValueError("a required scalar input is missing")
    return int(np.asarray(array).reshape(-1)[0])


def run_subgraph(ctx: KernelContext, body: Graph, feeds: dict[str, Any]) -> list[Any]:
    """``body`` run on ``feeds`` by the runner the planner gives every node with subgraphs."""
    if ctx.run_subgraph is None:
        raise ValueError(f"{ctx.node.op_type} runs a subgraph, but its context has no subgraph runner")
    return ctx.run_subgraph(body, feeds)
