"""Operator schemas: what an operator takes, its attributes with defaults, its shape inference."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from ..errors import InvalidGraphError
from ..ir import Node, Shape


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Default of an attribute the node must set.
REQUIRED: Any = _Required()

ATTRIBUTE_KINDS = frozenset(
    {
        "int",
        "float",
        "string",
        "tensor",
        "graph",
        "type_proto",
        "ints",
        "floats",
        "strings",
        "tensors",
        "graphs",
        "type_protos",
    }
)


@dataclass(frozen=True)
class Attribute:
    """An attribute of an operator. ``default=None`` means optional with no default."""

    name: str
    kind: str
    default: Any = None

    def __post_init__(self) -> None:
        if self.kind not in ATTRIBUTE_KINDS:
            raise ValueError(f"attribute {self.name!r}: unknown kind {self.kind!r}")


class TensorType(NamedTuple):
    """What shape inference knows of one value: element type and shape (either may be None)."""

    dtype: np.dtype | None
    shape: Shape


@dataclass
class InferenceContext:
    """What a shape-inference function sees of one node."""

    node: Node
    opset: int
    attrs: dict[str, Any]
    inputs: list[TensorType | None]
    #: Values of inputs that are constant (initializers or already folded), else None.
    constants: list[np.ndarray | None] = field(default_factory=list)

    def input(self, index: int) -> TensorType | None:
        return self.inputs[index] if index < len(self.inputs) else None

    def constant(self, index: int) -> np.ndarray | None:
        return self.constants[index] if index < len(self.constants) else None


InferFn = Callable[[InferenceContext], Sequence[TensorType]]


@dataclass(frozen=True)
class OpSchema:
    """One version of an operator, valid from ``since_version`` until the next version."""

    name: str
    domain: str = ""
    since_version: int = 1
    inputs: tuple[int, int] = (1, 1)  # min, max; max -1 means variadic
    outputs: tuple[int, int] = (1, 1)
    attributes: tuple[Attribute, ...] = ()
    infer: InferFn | None = None
    doc: str = ""

    def resolve_attrs(self, node: Node) -> dict[str, Any]:
        """The node's attributes with defaults filled in; raises for missing or unknown ones."""
        given = node.attrs
        if not given.keys() <= self._attribute_names:
            raise InvalidGraphError(
                f"node {node.label()!r}: {self.qualified_name} (opset {self.since_version}) has no "
                f"attribute(s) {sorted(given.keys() - self._attribute_names)}"
            )
        resolved = {}
        for attr in self.attributes:
            if attr.name in given:
                resolved[attr.name] = given[attr.name]
            elif attr.default is REQUIRED:
                raise InvalidGraphError(
                    f"node {node.label()!r}: {self.qualified_name} requires attribute {attr.name!r}"
                )
            elif attr.default is not None:
                resolved[attr.name] = attr.default
        return resolved

    def check_arity(self, node: Node) -> None:
        """Raise when the node has too few or too many inputs or outputs."""
        for what, count, (low, high) in (
            ("inputs", len(node.inputs), self.inputs),
            ("outputs", len(node.outputs), self.outputs),
        ):
            if count < low or (high >= 0 and count > high):
                expected = f"{low}..{'∞' if high < 0 else high}"
                raise InvalidGraphError(
                    f"node {node.label()!r}: {self.qualified_name} takes {expected} {what}, got {count}"
                )

    @cached_property
    def _attribute_names(self) -> frozenset[str]:
        return frozenset(attr.name for attr in self.attributes)

    @property
    def qualified_name(self) -> str:
        return f"{self.domain or 'ai.onnx'}::{self.name}"
