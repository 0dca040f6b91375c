"""The IR graph under construction, shared by the neural-network and ML-program lowerings."""

from __future__ import annotations

from typing import Any

import numpy as np
from spawnml import Limits, ModelLoadError
from spawnml.graph_builder import GraphBuilder
from spawnml.ir import Graph

#: The ai.onnx operator set lowered nodes are written against (Gelu needs 20).
OPSET = 20


class NotExpressible(Exception):
    """A layer or operation has no ai.onnx lowering; it is kept as a node of its Core ML domain."""


class CoreMLBuilder(GraphBuilder):
    """The graph of one Core ML model, with the Core ML domain for what has no lowering."""

    def __init__(self, name: str, domain: str, limits: Limits, described: str) -> None:
        super().__init__(Graph(opset_imports={"": OPSET, domain: 1}, name=name))
        self.domain, self.limits, self.described = domain, limits, described

    def keep(self, kind: str, inputs: list[str], outputs: list[str]) -> None:
        """A node of the Core ML domain for something with no lowering; sessions refuse it by name."""
        self.add_node(kind, inputs, outputs, domain=self.domain)

    def name_result(self, name: str, wanted: str) -> str:
        """Give the value ``name`` the model's own name ``wanted`` (made unique), renaming its node."""
        if not self.wrote_last(name) or name in self.graph.initializers:
            return self.emit("Identity", [name], output=self.fresh(wanted))
        return self.rename_last(self.fresh(wanted))

    def strided_slice(
        self,
        x: str,
        begin: list[int],
        end: list[int],
        strides: list[int],
        masks: tuple[list[bool], list[bool], list[bool]],
    ) -> str:
        """``x[begin:end:strides]`` on every axis; masked begins and ends take the whole axis and
        squeezed axes are removed (begin, end and squeeze masks, as in Core ML and TensorFlow)."""
        begin_mask, end_mask, squeeze_mask = (mask or [False] * len(begin) for mask in masks)
        if (
            not len(begin)
            == len(end)
            == len(strides)
            == len(begin_mask)
            == len(end_mask)
            == len(squeeze_mask)
        ):
            raise ModelLoadError(
                f"a slice in {self.described} has begins, ends, strides and masks of different lengths"
            )
        if 0 in strides:
            raise ModelLoadError(f"a slice in {self.described} has a zero stride")
        first, last = (-(2**63), 2**63 - 1)
        starts = [
            (last if s < 0 else 0) if m else b for b, s, m in zip(begin, strides, begin_mask, strict=True)
        ]
        ends = [
            (first if s < 0 else last) if m else e for e, s, m in zip(end, strides, end_mask, strict=True)
        ]
        for axis, squeeze in enumerate(squeeze_mask):
            if squeeze:
                ends[axis] = starts[axis] + 1 if starts[axis] != -1 else last
        axes = list(range(len(begin)))
        inputs = [
            x,
            self.ints(starts, "starts"),
            self.ints(ends, "ends"),
            self.ints(axes, "axes"),
            self.ints(strides, "steps"),
        ]
        y = self.emit("Slice", inputs)
        squeezed = [axis for axis, squeeze in enumerate(squeeze_mask) if squeeze]
        return self.emit("Squeeze", [y, self.ints(squeezed, "axes")]) if squeezed else y


def window(attrs: dict[str, Any], where: str) -> dict[str, Any]:
    """Convolution or pooling ``attrs``, refused unless kernel, strides, dilations and groups are positive."""
    for key in ("kernel_shape", "strides", "dilations", "group"):
        values = np.atleast_1d(attrs.get(key, 1))
        if np.any(values < 1):
            raise ModelLoadError(f"{where} has {key} {attrs[key]}; they must be positive")
    return attrs
