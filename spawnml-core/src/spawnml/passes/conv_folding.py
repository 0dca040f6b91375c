"""Fold a following BatchNormalization, or a per-channel Mul or Add by a constant, into a Conv
or ConvTranspose.

The convolution's weight and bias must be constants read by nothing else; new, folded copies
are added as initializers (the originals go when dead-node elimination finds them unread).
Conv weights hold output channels on axis 0; ConvTranspose weights ``(C, M / group, *K)`` hold
them on axis 1, group by group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Graph, Node
from .context import PassContext
from .graph_edit import constant, consumers, new_constant, only_reader, producers


def fold_into_conv(graph: Graph, ctx: PassContext) -> int:
    """Fold BatchNormalization / Mul / Add after Conv or ConvTranspose into its weights; return how many."""
    made, readers, taken = producers(graph), consumers(graph), graph.defined_names()
    removed: set[int] = set()
    for node in graph.nodes:
        if node.domain or node.op_type not in ("BatchNormalization", "Mul", "Add"):
            continue
        conv, channel = _conv_and_channel_input(graph, node, made, readers)
        if conv is None or ctx.placement(graph, conv) is not ctx.placement(graph, node):
            continue
        layout = _Layout.of(conv)
        weight, bias = _weights(graph, conv, layout)
        if weight is None:
            continue
        if node.op_type == "BatchNormalization":
            folded_params = _batch_norm(graph, node, layout, weight, bias)
        else:
            folded_params = _elementwise(graph, node.op_type, channel, layout, weight, bias)
        if folded_params is None:
            continue
        new_weight, new_bias = folded_params
        replaced, skipped = conv.inputs[1:], conv.outputs[0]
        conv.inputs = [
            conv.inputs[0],
            new_constant(graph, taken, f"{conv.inputs[1]}_folded", new_weight),
            new_constant(graph, taken, f"{conv.label()}_bias_folded", new_bias.astype(weight.dtype)),
        ]
        conv.outputs = [node.outputs[0]]
        removed.add(id(node))
        taken -= {skipped, *node.outputs[1:]}  # what no node makes any more
        _rewire(made, readers, conv, node, replaced, skipped)
    if removed:
        graph.nodes = [node for node in graph.nodes if id(node) not in removed]
    return len(removed)


def _rewire(
    made: dict[str, Node],
    readers: dict[str, list[Node]],
    conv: Node,
    removed: Node,
    replaced: list[str],
    skipped: str,
) -> None:
    """Bring the producer and reader maps up to date after ``removed`` was folded into ``conv``,
    whose weight and bias ``replaced`` gave way to new ones and whose output ``skipped`` is gone."""
    for name in {*removed.inputs, *replaced}:
        readers[name] = [
            reader for reader in readers.get(name, []) if reader is not removed and reader is not conv
        ]
    for name in conv.inputs:
        if not any(reader is conv for reader in readers[name]):
            readers[name].append(conv)
    del made[skipped]
    made[conv.outputs[0]] = conv


def _conv_and_channel_input(
    graph: Graph, node: Node, made: dict[str, Node], readers: dict[str, list[Node]]
) -> tuple[Node | None, str]:
    """The Conv feeding ``node`` as its only reader, and the name of ``node``'s other input."""
    names = node.inputs[:1] if node.op_type == "BatchNormalization" else node.inputs
    for index, name in enumerate(names):
        conv = made.get(name)
        if _is_conv(conv) and only_reader(graph, readers, name) is node:
            return conv, "" if node.op_type == "BatchNormalization" else node.inputs[1 - index]
    return None, ""


def _is_conv(node: Node | None) -> bool:
    return node is not None and node.op_type in ("Conv", "ConvTranspose") and not node.domain


@dataclass(frozen=True)
class _Layout:
    """Where a convolution's weight holds its output channels."""

    transposed: bool
    group: int

    @classmethod
    def of(cls, conv: Node) -> _Layout:
        return cls(conv.op_type == "ConvTranspose", conv.attrs.get("group", 1))

    def channels(self, weight: np.ndarray) -> int:
        """The number of output channels."""
        return weight.shape[1] * self.group if self.transposed else weight.shape[0]

    def scaled(self, weight: np.ndarray, factor: np.ndarray) -> np.ndarray:
        """``weight`` with each output channel's taps multiplied by its float64 ``factor``, rounded once
        to the weight's type (numpy casts block by block: no float64 copy of the whole weight)."""
        result = np.empty(weight.shape, weight.dtype)
        if not self.transposed:
            factor = factor.reshape((-1,) + (1,) * (weight.ndim - 1))
            np.multiply(weight, factor, out=result, casting="unsafe")
            return result
        grouped_shape = (self.group, -1, *weight.shape[1:])
        factor = factor.reshape(self.group, 1, -1, *(1,) * (weight.ndim - 2))
        np.multiply(
            weight.reshape(grouped_shape), factor, out=result.reshape(grouped_shape), casting="unsafe"
        )
        return result


def _weights(graph: Graph, conv: Node, layout: _Layout) -> tuple[np.ndarray | None, np.ndarray]:
    weight = constant(graph, conv.inputs[1])
    if weight is None or weight.dtype.kind != "f":
        return None, np.zeros(0)
    if len(conv.inputs) > 2 and conv.inputs[2]:
        bias = constant(graph, conv.inputs[2])
        return (weight, bias) if bias is not None else (None, np.zeros(0))
    return weight, np.zeros(layout.channels(weight), dtype=weight.dtype)


def _batch_norm(
    graph: Graph, node: Node, layout: _Layout, weight: np.ndarray, bias: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    if len([name for name in node.outputs if name]) != 1 or node.attrs.get("training_mode", 0):
        return None
    params = [constant(graph, name) for name in node.inputs[1:5]]
    if any(param is None for param in params):
        return None
    scale, shift, mean, var = (param.astype(np.float64) for param in params)  # type: ignore[union-attr]
    factor = scale / np.sqrt(var + node.attrs.get("epsilon", 1e-5))
    return layout.scaled(weight, factor), (bias - mean) * factor + shift


def _elementwise(
    graph: Graph, op: str, other: str, layout: _Layout, weight: np.ndarray, bias: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    value = constant(graph, other)
    per_channel = _per_channel(value, weight.ndim, layout.channels(weight))
    if per_channel is None:
        return None
    if op == "Mul":
        return layout.scaled(weight, per_channel), bias * per_channel
    return weight, bias + per_channel


def _per_channel(value: np.ndarray | None, rank: int, channels: int) -> np.ndarray | None:
    """``value`` as one number per output channel, when it broadcasts that way against Conv's output."""
    if value is None or value.dtype.kind != "f" or value.ndim > rank:
        return None
    shape = (1,) * (rank - value.ndim) + value.shape
    if shape[0] != 1 or any(dim != 1 for dim in shape[2:]) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(value.reshape(-1).astype(np.float64), (channels,))
