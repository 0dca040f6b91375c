"""MobileNetV2 built as an ai.onnx graph from torchvision's state dict.

:func:`mobilenet_v2_graph` takes ``image`` (float32, ``[batch, 3, height, width]``,
normalised) to ``logits`` (float32, ``[batch, classes]``), as
``torchvision.models.mobilenet_v2`` does in eval mode: convolutions (depthwise ones with
``group`` = channels), BatchNormalization, ReLU6 as Clip(0, 6), inverted residual blocks
with a linear bottleneck, GlobalAveragePool and a Gemm classifier.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import spawnml
from spawnml import InvalidArgumentError
from spawnml.graph_builder import GraphBuilder
from spawnml.ir import Graph, Value

from .assets import asset_file

WEIGHTS_ASSET = "mobilenet-v2-pth"
WEIGHTS_FILE = "mobilenet_v2-b0353104.pth"
OPSET = 17
INPUT, OUTPUT = "image", "logits"
BN_EPSILON = 1e-5
#: torchvision's inverted residual stages: (expansion, output channels, blocks, stride of the first).
STAGES = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)
#: The stride of each block ``features.1`` to ``features.17``.
BLOCK_STRIDES = tuple(stride if i == 0 else 1 for _, _, blocks, stride in STAGES for i in range(blocks))


class _Builder(GraphBuilder):
    """MobileNetV2's layers over a state dict; outputs are named after their operator."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        super().__init__(Graph(opset_imports={"": OPSET}, name="mobilenet_v2"))
        self.weights = weights

    def output_base(self, op_type: str, inputs: list[str]) -> str:
        return op_type.lower()

    def shape(self, name: str) -> tuple[int, ...]:
        if name not in self.weights:
            raise InvalidArgumentError(f"the MobileNetV2 state dict has no tensor {name!r}")
        return tuple(np.shape(self.weights[name]))

    def weight(self, name: str) -> str:
        self.shape(name)
        return self.initializer(np.asarray(self.weights[name], dtype=np.float32), name=self.claim(name))

    def transposed_weight(self, name: str) -> str:
        """The matrix ``name`` transposed, as a contiguous initializer ``name.T``."""
        self.shape(name)
        matrix = np.asarray(self.weights[name], dtype=np.float32)
        return self.initializer(np.ascontiguousarray(matrix.T), name=self.claim(f"{name}.T"))

    def op(self, op_type: str, *inputs: str, output: str = "", **attrs: object) -> str:
        """Append one node, its attributes as keywords; ``output`` names a graph output."""
        return self.emit(op_type, list(inputs), attrs, output=output and self.claim(output))

    def conv_bn(self, x: str, prefix: str, stride: int = 1, relu6: bool = True) -> str:
        """``Conv2d(bias=False)`` at ``prefix.0`` and ``BatchNorm2d`` at ``prefix.1``, then ReLU6."""
        out_channels, in_per_group, size, _ = self.shape(f"{prefix}.0.weight")
        groups = out_channels if in_per_group == 1 and size > 1 else 1  # depthwise
        return self.conv_then_norm(x, f"{prefix}.0", f"{prefix}.1", stride, groups, relu6)

    def conv_then_norm(self, x: str, conv: str, norm: str, stride: int, groups: int, relu6: bool) -> str:
        size = self.shape(f"{conv}.weight")[-1]
        pad = (size - 1) // 2
        y = self.op(
            "Conv",
            x,
            self.weight(f"{conv}.weight"),
            group=groups,
            kernel_shape=[size, size],
            pads=[pad] * 4,
            strides=[stride, stride],
        )
        y = self.op(
            "BatchNormalization",
            y,
            *(self.weight(f"{norm}.{name}") for name in ("weight", "bias", "running_mean", "running_var")),
            epsilon=BN_EPSILON,
        )
        return (
            self.op("Clip", y, self.constant("relu6_min", 0.0), self.constant("relu6_max", 6.0))
            if relu6
            else y
        )

    def constant(self, name: str, value: float) -> str:
        """A float32 scalar, stored once however often it is asked for."""
        if name not in self.graph.initializers:
            self.initializer(np.array(value, dtype=np.float32), name=self.claim(name))
        return name

    def inverted_residual(self, x: str, prefix: str, stride: int) -> str:
        """torchvision's ``InvertedResidual``: [expand 1x1,] depthwise 3x3, linear 1x1 projection."""
        layers = 4 if f"{prefix}.conv.3.weight" in self.weights else 3
        y = x
        if layers == 4:
            y = self.conv_bn(y, f"{prefix}.conv.0")
        y = self.conv_bn(y, f"{prefix}.conv.{layers - 3}", stride)
        y = self.conv_then_norm(y, f"{prefix}.conv.{layers - 2}", f"{prefix}.conv.{layers - 1}", 1, 1, False)
        in_channels = self.shape(f"{prefix}.conv.0.0.weight")[1 if layers == 4 else 0]
        out_channels = self.shape(f"{prefix}.conv.{layers - 2}.weight")[0]
        return self.op("Add", x, y) if stride == 1 and in_channels == out_channels else y


def mobilenet_v2_graph(weights: dict[str, np.ndarray]) -> Graph:
    """The eval-mode MobileNetV2 of a torchvision state dict (``features.*``, ``classifier.1.*``)."""
    b = _Builder(weights)
    b.graph.inputs = [Value(INPUT, np.dtype(np.float32), ("batch", 3, "height", "width"))]
    x = b.conv_bn(INPUT, "features.0", stride=2)
    for index, stride in enumerate(BLOCK_STRIDES, start=1):
        x = b.inverted_residual(x, f"features.{index}", stride)
    x = b.conv_bn(x, f"features.{len(BLOCK_STRIDES) + 1}")
    x = b.op("Flatten", b.op("GlobalAveragePool", x), axis=1)
    # The classifier's (classes, features) weight stored transposed: a product of one image's
    # features with a (features, classes) matrix reads its 5 MB faster (CPU: 360 -> 240 us in the network).
    classifier = b.transposed_weight("classifier.1.weight")
    b.op("Gemm", x, classifier, b.weight("classifier.1.bias"), output=OUTPUT)
    classes = b.graph.initializers[classifier].shape[1]
    b.graph.outputs = [Value(OUTPUT, np.dtype(np.float32), ("batch", classes))]
    return b.graph


def load_mobilenet_v2(
    weights: str | Path | None = None, providers: Sequence[str] | None = None
) -> spawnml.InferenceSession:
    """A session running MobileNetV2 from a torchvision checkpoint, by default the cached ImageNet one."""
    weights = weights if weights is not None else asset_file(WEIGHTS_ASSET, WEIGHTS_FILE)
    tensors = spawnml.load(os.fspath(weights)).initializers
    return spawnml.InferenceSession(mobilenet_v2_graph(tensors), providers=providers)
