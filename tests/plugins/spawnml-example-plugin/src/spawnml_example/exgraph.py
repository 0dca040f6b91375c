"""The ``exgraph`` format: a magic line, then the graph as one JSON document.

::

    #exgraph
    {"opsets": {"": 17, "com.example": 1},
     "inputs": [{"name": "x", "dtype": "float32", "shape": ["n", 4]}],
     "outputs": [{"name": "y", "dtype": "float32", "shape": ["n", 4]}],
     "initializers": {"w": {"dtype": "float32", "shape": [4], "data": [1, 2, 3, 4]}},
     "nodes": [{"op": "Swish", "domain": "com.example", "inputs": ["x"], "outputs": ["s"],
                "attrs": {"beta": 1.5}},
               {"op": "Mul", "inputs": ["s", "w"], "outputs": ["y"]}]}
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
from spawnml import Limits, ModelLoadError
from spawnml.formats import FormatLoader, ModelSource
from spawnml.ir import Graph, Node, Value

MAGIC = b"#exgraph\n"
#: Element types a file may use: booleans and numbers, never Python objects.
DTYPE_KINDS = "biuf"


class ExgraphLoader(FormatLoader):
    """Recognises the magic line (or the ``.exgraph`` extension) and lowers the JSON to the IR."""

    name: ClassVar[str] = "exgraph"
    extensions: ClassVar[tuple[str, ...]] = (".exgraph",)

    def sniff(self, head: bytes) -> bool:
        return head.startswith(MAGIC)

    def load(self, source: ModelSource, limits: Limits) -> Graph:
        data = source.read(limits)
        if not data.startswith(MAGIC):
            raise ModelLoadError(f"{source.describe()} does not start with {MAGIC!r}")
        try:
            return lower(json.loads(data[len(MAGIC) :]))
        except (ValueError, KeyError, TypeError) as error:
            raise ModelLoadError(f"{source.describe()} is not a valid exgraph file: {error!r}") from error


def lower(document: dict[str, Any]) -> Graph:
    """The IR graph a parsed exgraph document describes."""
    return Graph(
        nodes=[
            Node(
                op_type=node["op"],
                inputs=list(node["inputs"]),
                outputs=list(node["outputs"]),
                attrs=dict(node.get("attrs", {})),
                name=node.get("name", ""),
                domain=node.get("domain", ""),
            )
            for node in document["nodes"]
        ],
        inputs=[value(entry) for entry in document["inputs"]],
        outputs=[value(entry) for entry in document["outputs"]],
        initializers={name: array(entry) for name, entry in document.get("initializers", {}).items()},
        opset_imports={domain: int(version) for domain, version in document["opsets"].items()},
        name=document.get("name", "exgraph"),
    )


def value(entry: dict[str, Any]) -> Value:
    shape = entry.get("shape")
    return Value(entry["name"], element_type(entry["dtype"]), None if shape is None else tuple(shape))


def array(entry: dict[str, Any]) -> np.ndarray:
    return np.array(entry["data"], dtype=element_type(entry["dtype"])).reshape(entry["shape"])


def element_type(name: str) -> np.dtype:
    dtype = np.dtype(name)
    if dtype.kind not in DTYPE_KINDS:
        raise ValueError(f"element type {name!r} is not a boolean or numeric type")
    return dtype
