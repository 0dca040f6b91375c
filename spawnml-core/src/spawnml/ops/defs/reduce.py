"""Reducing ai.onnx operators: the Reduce* family, ArgMax/ArgMin, CumSum and the softmaxes.

Only the versions whose attributes or inputs changed have their own schema.
"""

from __future__ import annotations

import numpy as np

from ..schema import Attribute, InferenceContext, OpSchema, TensorType
from ..shapes import constant_ints, normalize_axis, reduced_shape, same_as_input

INT64 = np.dtype(np.int64)

_KEEPDIMS = Attribute("keepdims", "int", 1)
_NOOP = Attribute("noop_with_empty_axes", "int", 0)

#: The opset from which each reduction takes its axes as an input instead of an attribute.
AXES_INPUT_SINCE = {
    "ReduceSum": 13,
    **dict.fromkeys(
        (
            "ReduceMean",
            "ReduceMax",
            "ReduceMin",
            "ReduceProd",
            "ReduceL1",
            "ReduceL2",
            "ReduceLogSum",
            "ReduceLogSumExp",
            "ReduceSumSquare",
        ),
        18,
    ),
}


def _infer_reduce(ctx: InferenceContext) -> list[TensorType]:
    data = ctx.input(0) or TensorType(None, None)
    keepdims = bool(ctx.attrs["keepdims"])
    has_axes_input = len(ctx.node.inputs) > 1 and bool(ctx.node.inputs[1])
    axes = constant_ints(ctx, 1) if has_axes_input else ctx.attrs.get("axes")
    if has_axes_input and axes is None:
        unknown = None if data.shape is None or not keepdims else (None,) * len(data.shape)
        return [TensorType(data.dtype, unknown)]
    if not axes:
        axes = [] if ctx.attrs.get("noop_with_empty_axes") else None
    return [TensorType(data.dtype, reduced_shape(data.shape, axes, keepdims))]


def _infer_arg(ctx: InferenceContext) -> list[TensorType]:
    data = ctx.input(0) or TensorType(None, None)
    return [TensorType(INT64, reduced_shape(data.shape, [ctx.attrs["axis"]], bool(ctx.attrs["keepdims"])))]


def _infer_softmax(ctx: InferenceContext) -> list[TensorType]:
    data = ctx.input(0)
    if data is not None and data.shape is not None:
        normalize_axis(ctx.attrs["axis"], len(data.shape))
    return same_as_input()(ctx)


def _reductions(name: str) -> list[OpSchema]:
    return [
        OpSchema(name, attributes=(Attribute("axes", "ints"), _KEEPDIMS), infer=_infer_reduce),
        OpSchema(
            name,
            since_version=AXES_INPUT_SINCE[name],
            inputs=(1, 2),
            attributes=(_KEEPDIMS, _NOOP),
            infer=_infer_reduce,
        ),
    ]


def _arg(name: str) -> list[OpSchema]:
    axis = Attribute("axis", "int", 0)
    return [
        OpSchema(name, attributes=(axis, _KEEPDIMS), infer=_infer_arg),
        OpSchema(
            name,
            since_version=12,
            attributes=(axis, _KEEPDIMS, Attribute("select_last_index", "int", 0)),
            infer=_infer_arg,
        ),
    ]


def _softmax(name: str) -> list[OpSchema]:
    """Version 1 (2-D coercion around ``axis``, default 1) and 13 (one axis, default -1)."""
    return [
        OpSchema(name, attributes=(Attribute("axis", "int", 1),), infer=_infer_softmax),
        OpSchema(name, since_version=13, attributes=(Attribute("axis", "int", -1),), infer=_infer_softmax),
    ]


SCHEMAS: list[OpSchema] = [
    *(schema for name in AXES_INPUT_SINCE for schema in _reductions(name)),
    *_arg("ArgMax"),
    *_arg("ArgMin"),
    OpSchema(
        "CumSum",
        since_version=11,
        inputs=(2, 2),
        attributes=(Attribute("exclusive", "int", 0), Attribute("reverse", "int", 0)),
        infer=same_as_input(),
    ),
    *(schema for name in ("Softmax", "LogSoftmax", "Hardmax") for schema in _softmax(name)),
]
