"""Elementwise ai.onnx operators: math and activations, arithmetic, comparison, logic,
bitwise operators, Clip, Where and the casts.

Only the versions whose attributes or inputs changed have their own schema; a version
that only widened the accepted element types is covered by the one before it.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ...dtypes import from_onnx
from ...errors import InvalidGraphError
from ..schema import REQUIRED, Attribute, InferenceContext, InferFn, OpSchema, TensorType
from ..shapes import broadcast_inputs, same_as_input

BOOL = np.dtype(np.bool_)
FLT_MAX = 3.4028234663852886e38

#: (since_version, attributes) of one version of an operator.
Version = tuple[int, tuple[Attribute, ...]]

_CONSUMED = Attribute("consumed_inputs", "ints")
_LEGACY_BROADCAST = (Attribute("broadcast", "int", 0), Attribute("axis", "int"))
_SATURATE = Attribute("saturate", "int", 1)
_ROUND_MODE = Attribute("round_mode", "string", "up")


def _float(name: str, default: float) -> Attribute:
    """A float attribute; its default rounded to float32, as ONNX stores float attributes."""
    return Attribute(name, "float", float(np.float32(default)))


def _alpha(default: float) -> Attribute:
    return _float("alpha", default)


def _legacy(*attrs: Attribute) -> list[Version]:
    """Version 1 (with the obsolete ``consumed_inputs``) and version 6 of an operator."""
    return [(1, (_CONSUMED, *attrs)), (6, attrs)]


def _infer_prelu(ctx: InferenceContext) -> list[TensorType]:
    """X's type and shape. Before opset 7 a 1-D slope as long as the channel axis is per channel
    (axis 1), not broadcast from the right; from 7 the slope broadcasts to X."""
    if ctx.opset < 7:
        return list(same_as_input()(ctx))
    return list(broadcast_inputs()(ctx))


def _since(version: int, *attrs: Attribute) -> list[Version]:
    return [(version, attrs)]


def _schemas(
    names: Iterable[str], versions: list[Version], infer: InferFn, inputs: tuple[int, int] = (1, 1)
) -> list[OpSchema]:
    return [
        OpSchema(name, since_version=since, inputs=inputs, attributes=attrs, infer=infer)
        for name in names
        for since, attrs in versions
    ]


def _binary_infer(output_dtype: np.dtype | None = None) -> InferFn:
    """Infer a two-input operator; before opset 7 ``broadcast=1`` gives A's shape."""
    multidirectional = broadcast_inputs(0, output_dtype)

    def infer(ctx: InferenceContext) -> list[TensorType]:
        if not ctx.attrs.get("broadcast"):
            return multidirectional(ctx)
        first = ctx.input(0) or TensorType(None, None)
        return [TensorType(output_dtype or first.dtype, first.shape)]

    return infer


def _infer_mod(ctx: InferenceContext) -> list[TensorType]:
    first = ctx.input(0)
    floating = first is not None and first.dtype is not None and first.dtype.kind not in "biu"
    if floating and not ctx.attrs["fmod"] and ctx.opset < 28:
        assert first is not None  # floating says so
        raise InvalidGraphError(f"Mod of {first.dtype} needs fmod=1 before opset 28")
    return broadcast_inputs()(ctx)


def _infer_cast(ctx: InferenceContext) -> list[TensorType]:
    source = ctx.input(0)
    return [TensorType(from_onnx(ctx.attrs["to"]), source.shape if source else None)]


def _infer_cast_like(ctx: InferenceContext) -> list[TensorType]:
    source, target = ctx.input(0), ctx.input(1)
    return [TensorType(target.dtype if target else None, source.shape if source else None)]


#: Operators whose one output has the type and shape of their one input.
_UNARY: dict[str, list[Version]] = {
    **dict.fromkeys(
        ("Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Tanh", "Sigmoid", "Relu"),
        _legacy(),
    ),
    **dict.fromkeys(("Not", "Softplus", "Softsign"), _since(1)),
    **dict.fromkeys(("Sin", "Cos", "Tan", "Asin", "Acos", "Atan"), _since(7)),
    **dict.fromkeys(("Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf", "Sign"), _since(9)),
    "Round": _since(11),
    "HardSwish": _since(14),
    "Mish": _since(18),
    "BitwiseNot": _since(18),
    "LeakyRelu": _legacy(_alpha(0.01)),
    "Elu": _legacy(_alpha(1.0)),
    "HardSigmoid": _legacy(_alpha(0.2), _float("beta", 0.5)),
    "Selu": [
        (1, (_CONSUMED, _alpha(1.6732), _float("gamma", 1.0507))),
        (6, (_alpha(1.67326319217681884765625), _float("gamma", 1.05070102214813232421875))),
    ],
    "Celu": _since(12, _alpha(1.0)),
    "ThresholdedRelu": _since(10, _alpha(1.0)),
    "Gelu": _since(20, Attribute("approximate", "string", "none")),
    "Clip": [
        (1, (_CONSUMED, Attribute("min", "float"), Attribute("max", "float"))),
        (6, (_float("min", -FLT_MAX), _float("max", FLT_MAX))),
    ],
}
_LEGACY_BINARY = [(1, (_CONSUMED, *_LEGACY_BROADCAST)), (6, _LEGACY_BROADCAST), (7, ())]
_LEGACY_LOGIC = [(1, _LEGACY_BROADCAST), (7, ())]
_TO = Attribute("to", "int", REQUIRED)
_CAST = [(6, (_TO,)), (19, (_TO, _SATURATE)), (24, (_TO, _SATURATE, _ROUND_MODE))]
_CAST_LIKE = [(15, ()), (19, (_SATURATE,)), (24, (_SATURATE, _ROUND_MODE))]
_TWO = (2, 2)

SCHEMAS: list[OpSchema] = [
    *(schema for name, versions in _UNARY.items() for schema in _schemas([name], versions, same_as_input())),
    OpSchema("Clip", since_version=11, inputs=(1, 3), infer=same_as_input()),
    *_schemas(["IsNaN"], _since(9), broadcast_inputs(output_dtype=BOOL)),
    *_schemas(
        ["IsInf"],
        _since(10, Attribute("detect_negative", "int", 1), Attribute("detect_positive", "int", 1)),
        broadcast_inputs(output_dtype=BOOL),
    ),
    *_schemas(("Add", "Sub", "Mul", "Div"), _LEGACY_BINARY, _binary_infer(), _TWO),
    *_schemas(["Pow"], _LEGACY_LOGIC, _binary_infer(), _TWO),
    *_schemas(("Equal", "Less", "Greater", "And", "Or", "Xor"), _LEGACY_LOGIC, _binary_infer(BOOL), _TWO),
    *_schemas(("LessOrEqual", "GreaterOrEqual"), _since(12), broadcast_inputs(output_dtype=BOOL), _TWO),
    *_schemas(["Mod"], _since(10, Attribute("fmod", "int", 0)), _infer_mod, _TWO),
    *_schemas(["BitShift"], _since(11, Attribute("direction", "string", REQUIRED)), broadcast_inputs(), _TWO),
    *_schemas(("BitwiseAnd", "BitwiseOr", "BitwiseXor"), _since(18), broadcast_inputs(), _TWO),
    *_schemas(["PRelu"], _legacy(), _infer_prelu, _TWO),
    *_schemas(("Max", "Min", "Sum", "Mean"), _legacy(), broadcast_inputs(), (1, -1)),
    *_schemas(["Where"], _since(9), broadcast_inputs(dtype_from=1), (3, 3)),
    *_schemas(["Cast"], _CAST, _infer_cast),
    *_schemas(["CastLike"], _CAST_LIKE, _infer_cast_like, _TWO),
]
