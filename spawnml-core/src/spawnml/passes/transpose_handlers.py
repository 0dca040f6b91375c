"""How each layout-agnostic operator reads a Transpose's input in place of its output.

For a node whose input is ``Transpose(s, perm)``, a handler says how the same node computes on
``s`` instead: which inputs must then come in ``s``'s layout, what its attributes and constant
inputs (axes, pads, scales) become, and the permutation that turns each output back into the
layout the original node gave. The optimizer (``transpose_optimizer``) does the rewiring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..ir import Node
from ..ops.shapes import as_text

Perm = list[int]


class View(Protocol):
    """What a handler may ask of the graph around the node."""

    opset: int

    def constant(self, name: str) -> np.ndarray | None: ...

    def rank(self, name: str) -> int | None: ...

    def shape(self, name: str) -> tuple[Any, ...] | None: ...


@dataclass
class Push:
    """A node's rewrite onto the untransposed input.

    ``layout`` are the inputs that must come in the source layout (of lower rank: broadcast, so
    unsqueezed in front first); ``outputs`` the permutation to apply to each output (None: the
    output is already in its original layout); ``attrs`` and ``constants`` replace attributes
    and constant inputs (by input index).
    """

    layout: list[int]
    outputs: list[Perm | None]
    attrs: dict[str, Any] = field(default_factory=dict)
    constants: dict[int, np.ndarray] = field(default_factory=dict)


Handler = Callable[[Node, Perm, View], "Push | None"]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


UNARY = _names(
    """Relu LeakyRelu Sigmoid HardSigmoid HardSwish Tanh Exp Log Abs Neg Sqrt Reciprocal Floor Ceil
    Round Erf Sign Softplus Softsign Elu Selu Celu Gelu Mish Not Cast Identity IsNaN IsInf Sin Cos
    Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh ThresholdedRelu Clip Shrink BitwiseNot"""
)
#: Elementwise operators of several inputs that broadcast them (numpy's rules).
BROADCASTING = _names(
    """Add Sub Mul Div Pow Mod Max Min Mean Sum Equal Greater Less GreaterOrEqual LessOrEqual And Or
    Xor BitShift BitwiseAnd BitwiseOr BitwiseXor PRelu Where"""
)
REDUCTIONS = _names(
    """ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum
    ReduceLogSumExp ReduceSumSquare"""
)


def inverse(perm: Perm) -> Perm:
    result = [0] * len(perm)
    for index, axis in enumerate(perm):
        result[axis] = index
    return result


def is_identity(perm: Perm | None) -> bool:
    return perm is not None and list(perm) == list(range(len(perm)))


def _axis(axis: int, rank: int) -> int | None:
    axis = int(axis)
    return axis + rank if -rank <= axis < 0 else axis if 0 <= axis < rank else None


def _axes(axes: Any, rank: int) -> list[int] | None:
    """Axes made non-negative; None when one is out of range or one repeats."""
    found = [_axis(axis, rank) for axis in axes]
    if any(axis is None for axis in found) or len(set(found)) != len(found):
        return None
    return [axis for axis in found if axis is not None]


def _kept_perm(perm: Perm, removed: list[int]) -> Perm | None:
    """The permutation of what stays when ``removed`` axes of ``Transpose(s, perm)`` go (and the
    matching axes of ``s``): None where it is the identity."""
    kept = [perm[axis] for axis in range(len(perm)) if axis not in removed]
    order = sorted(kept)
    result = [order.index(axis) for axis in kept]
    return None if is_identity(result) else result


def _input(node: Node, index: int) -> str:
    return node.inputs[index] if index < len(node.inputs) else ""


def unary(node: Node, perm: Perm, view: View) -> Push | None:
    return Push([0], [perm])


def broadcasting(node: Node, perm: Perm, view: View) -> Push | None:
    ranks = [view.rank(name) for name in node.inputs]
    if any(rank is None or rank > len(perm) for rank in ranks):
        return None
    return Push(list(range(len(node.inputs))), [perm])


def with_axis(node: Node, perm: Perm, view: View) -> Push | None:
    """Softmax, LogSoftmax and Hardmax, which act along one axis from opset 13."""
    axis = _axis(node.attrs.get("axis", -1), len(perm))
    if view.opset < 13 or axis is None:
        return None
    return Push([0], [perm], {"axis": perm[axis]})


def _constant_axes(node: Node, view: View, index: int, attr: str, from_opset: int) -> tuple[Any, bool]:
    """A node's axes, from its attribute before ``from_opset`` and its constant input from then
    on; whether they came from the input. ``None`` axes: given in neither; ``False``: not constant."""
    if view.opset < from_opset:
        return node.attrs.get(attr), False
    name = _input(node, index)
    if not name:
        return None, True
    found = view.constant(name)
    return (False if found is None else found.reshape(-1).tolist()), True


def _set_axes(push: Push, axes: list[int], index: int, attr: str, as_input: bool) -> Push:
    if as_input:
        push.constants[index] = np.array(axes, np.int64)
    else:
        push.attrs[attr] = axes
    return push


def reduction(node: Node, perm: Perm, view: View) -> Push | None:
    rank = len(perm)
    since = 13 if node.op_type == "ReduceSum" else 18
    given, as_input = _constant_axes(node, view, 1, "axes", since)
    if given is False:
        return None
    if not given:
        if node.attrs.get("noop_with_empty_axes", 0):
            return Push([0], [perm])  # the identity
        return Push([0], [None])  # every axis: ones, or a scalar, in any order
    axes = _axes(given, rank)
    if axes is None:
        return None
    moved = sorted(perm[axis] for axis in axes)
    output = perm if node.attrs.get("keepdims", 1) else _kept_perm(perm, axes)
    return _set_axes(Push([0], [output]), moved, 1, "axes", as_input)


def arg_reduction(node: Node, perm: Perm, view: View) -> Push | None:
    axis = _axis(node.attrs.get("axis", 0), len(perm))
    if axis is None:
        return None
    output = perm if node.attrs.get("keepdims", 1) else _kept_perm(perm, [axis])
    return Push([0], [output], {"axis": perm[axis]})


def concat(node: Node, perm: Perm, view: View) -> Push | None:
    axis = _axis(node.attrs.get("axis", 0), len(perm))
    if axis is None or any(view.rank(name) != len(perm) for name in node.inputs):
        return None
    return Push(list(range(len(node.inputs))), [perm], {"axis": perm[axis]})


def split(node: Node, perm: Perm, view: View) -> Push | None:
    axis = _axis(node.attrs.get("axis", 0), len(perm))
    if axis is None:
        return None
    return Push([0], [perm] * len(node.outputs), {"axis": perm[axis]})


def squeeze(node: Node, perm: Perm, view: View) -> Push | None:
    given, as_input = _constant_axes(node, view, 1, "axes", 13)
    axes = _axes(given, len(perm)) if given else None
    if axes is None:
        return None  # squeezing every axis of size one: which ones needs known shapes
    moved = sorted(perm[axis] for axis in axes)
    return _set_axes(Push([0], [_kept_perm(perm, axes)]), moved, 1, "axes", as_input)


def unsqueeze(node: Node, perm: Perm, view: View) -> Push | None:
    given, _ = _constant_axes(node, view, 1, "axes", 13)
    rank = len(perm) + (len(given) if given else 0)
    axes = _axes(given, rank) if given else None
    if axes is None:
        return None
    # The new axes stay where they are; the others hold s's axes, which the output permutes.
    others = [axis for axis in range(rank) if axis not in axes]
    output = list(range(rank))
    for index, axis in enumerate(others):
        output[axis] = others[perm[index]]
    return Push([0], [None if is_identity(output) else output])


def _permuted_pairs(values: np.ndarray, perm: Perm) -> np.ndarray:
    """Per-axis begin values then end values (pads, a Resize's roi), for the axes of ``s``."""
    rank = len(perm)
    result = values.copy()
    for index, axis in enumerate(perm):
        result[axis], result[axis + rank] = values[index], values[index + rank]
    return result


def pad(node: Node, perm: Perm, view: View) -> Push | None:
    rank = len(perm)
    if view.opset < 11:
        pads = node.attrs.get("pads")
        if pads is None or len(pads) != 2 * rank:
            return None
        return Push([0], [perm], {"pads": _permuted_pairs(np.array(pads), perm).tolist()})
    if _input(node, 3):  # axes (opset 18): they move, the pads stay
        given = view.constant(node.inputs[3])
        axes = None if given is None else _axes(given.reshape(-1).tolist(), rank)
        if axes is None:
            return None
        return Push([0], [perm], constants={3: np.array([perm[axis] for axis in axes], np.int64)})
    pads_value = view.constant(_input(node, 1)) if _input(node, 1) else None
    if pads_value is None or pads_value.size != 2 * rank:
        return None
    return Push([0], [perm], constants={1: _permuted_pairs(pads_value.reshape(-1), perm)})


def slice_(node: Node, perm: Perm, view: View) -> Push | None:
    rank = len(perm)
    if view.opset < 10:
        starts = node.attrs.get("starts")
        if starts is None:
            return None
        axes = _axes(node.attrs.get("axes", range(len(starts))), rank)
        return None if axes is None else Push([0], [perm], {"axes": [perm[axis] for axis in axes]})
    if _input(node, 3):
        given = view.constant(node.inputs[3])
        axes = None if given is None else _axes(given.reshape(-1).tolist(), rank)
    else:
        starts = view.constant(node.inputs[1])
        axes = None if starts is None else list(range(starts.size))
    if axes is None:
        return None
    moved = np.array([perm[axis] for axis in axes], np.int64)
    return Push([0], [perm], constants={3: moved})


def resize(node: Node, perm: Perm, view: View) -> Push | None:
    """Permute a Resize's roi, scales and sizes, only where it then resizes no axis of the first
    two (batch and channels): there every backend's Resize runs, as a plain spatial one."""
    if node.attrs.get("axes") is not None or node.attrs.get("antialias", 0):
        return None
    if as_text(node.attrs.get("keep_aspect_ratio_policy", "stretch")) != "stretch":
        return None
    back = inverse(perm)
    if view.opset < 11:
        scales = view.constant(_input(node, 1)) if _input(node, 1) else None
        if scales is None or scales.size != len(perm) or not _spatial_only(scales, perm, 1):
            return None
        return Push([0], [perm], constants={1: scales.reshape(-1)[back]})
    push = Push([0], [perm])
    roi_name = _input(node, 1)
    if roi_name and as_text(node.attrs.get("coordinate_transformation_mode", "")) == "tf_crop_and_resize":
        roi = view.constant(roi_name)
        if roi is None or roi.size != 2 * len(perm):
            return None
        push.constants[1] = _permuted_pairs(roi.reshape(-1), perm)
    for index in (2, 3):
        name = _input(node, index)
        if not name:
            continue
        values = view.constant(name)
        if values is None or values.size != len(perm):
            return None
        values = values.reshape(-1)
        kept = 1 if index == 2 else view.shape(node.inputs[0])  # sizes: batch and channels' own
        if kept is None or not _spatial_only(values, perm, kept):
            return None
        push.constants[index] = values[back]
    return push if push.constants.keys() - {1} else None


def _spatial_only(values: np.ndarray, perm: Perm, kept: Any) -> bool:
    """Whether the scales (``kept`` 1) or sizes (``kept`` the input's shape) of a Resize of
    ``Transpose(s, perm)`` leave ``s``'s first two axes as they are."""
    if len(perm) < 3:
        return False
    for axis in (perm.index(0), perm.index(1)):
        want = kept if isinstance(kept, int) else kept[axis]
        if not isinstance(want, int) or values[axis] != want:
            return False
    return True


def quantize(node: Node, perm: Perm, view: View) -> Push | None:
    """QuantizeLinear and DequantizeLinear, per tensor or per axis (not blocked)."""
    if node.attrs.get("block_size", 0):
        return None
    scale = _input(node, 1)
    scale_rank = view.rank(scale)
    if scale_rank is None or scale_rank > 1:
        return None
    if scale_rank == 0 or view.opset < 13:
        constant = view.constant(scale)
        per_tensor = scale_rank == 0 or (constant is not None and constant.size == 1)
        return Push([0], [perm]) if per_tensor else None
    axis = _axis(node.attrs.get("axis", 1), len(perm))
    return None if axis is None else Push([0], [perm], {"axis": perm[axis]})


GROUPS: tuple[tuple[frozenset[str] | tuple[str, ...], Handler], ...] = (
    (UNARY, unary),
    (BROADCASTING, broadcasting),
    (REDUCTIONS, reduction),
    (("Softmax", "LogSoftmax", "Hardmax"), with_axis),
    (("ArgMax", "ArgMin"), arg_reduction),
    (("QuantizeLinear", "DequantizeLinear"), quantize),
    (("Concat",), concat),
    (("Split",), split),
    (("Squeeze",), squeeze),
    (("Unsqueeze",), unsqueeze),
    (("Pad",), pad),
    (("Slice",), slice_),
    (("Resize",), resize),
)
#: The handler of each operator of the default domain that a Transpose can move past.
HANDLERS: dict[str, Handler] = {op: handler for ops, handler in GROUPS for op in ops}
