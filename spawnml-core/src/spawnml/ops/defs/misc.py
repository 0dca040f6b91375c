"""Miscellaneous ai.onnx operators: CumProd, Det, BitCast, the deprecated Scatter,
TensorScatter, Shrink, LpNormalization, the random generators, CausalConvWithState and the
ai.onnx.preview.training optimizers.

Only the versions whose attributes or inputs changed have their own schema.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import from_onnx
from ...ir import Shape
from ..schema import REQUIRED, Attribute, InferenceContext, InferFn, OpSchema, TensorType
from ..shapes import same_as_input

TRAINING_DOMAIN = "ai.onnx.preview.training"
#: How many state tensors each optimizer keeps per optimized tensor (besides X and G).
OPTIMIZER_STATES = {"Adagrad": 1, "Momentum": 1, "Adam": 2}
#: ONNX codes of float and int32, the default element types of the generators.
FLOAT_CODE, INT32_CODE = 1, 6


def _input(ctx: InferenceContext, index: int) -> TensorType:
    return ctx.input(index) or TensorType(None, None)


def _infer_det(ctx: InferenceContext) -> list[TensorType]:
    x = _input(ctx, 0)
    return [TensorType(x.dtype, None if x.shape is None else x.shape[:-2])]


def _infer_bit_cast(ctx: InferenceContext) -> list[TensorType]:
    return [TensorType(from_onnx(ctx.attrs["to"]), _input(ctx, 0).shape)]


def _typed_like(ctx: InferenceContext) -> list[TensorType]:
    """A generator shaped like its input, of ``dtype`` when set, else of the input's type."""
    x = _input(ctx, 0)
    code = ctx.attrs.get("dtype")
    return [TensorType(x.dtype if code is None else from_onnx(code), x.shape)]


def _infer_random(ctx: InferenceContext) -> list[TensorType]:
    return [TensorType(from_onnx(ctx.attrs["dtype"]), tuple(int(d) for d in ctx.attrs["shape"]))]


def _infer_multinomial(ctx: InferenceContext) -> list[TensorType]:
    x = _input(ctx, 0)
    batch = None if x.shape is None else x.shape[0]
    return [TensorType(from_onnx(ctx.attrs["dtype"]), (batch, ctx.attrs["sample_size"]))]


def _infer_causal_conv(ctx: InferenceContext) -> list[TensorType]:
    x, weight = _input(ctx, 0), _input(ctx, 1)
    kernel = weight.shape[2] if weight.shape is not None and len(weight.shape) == 3 else None
    state: Shape = None
    if x.shape is not None:
        state = (*x.shape[:2], kernel - 1 if isinstance(kernel, int) else None)
    return [x, TensorType(x.dtype, state)]


def optimizer_groups(name: str, inputs: int) -> int:
    """How many tensors an optimizer node with ``inputs`` inputs updates."""
    return (inputs - 2) // (2 + OPTIMIZER_STATES[name])


def _infer_optimizer(ctx: InferenceContext) -> list[TensorType]:
    """Updated tensors take the types of X, then of each state, in input order."""
    count = optimizer_groups(ctx.node.op_type, len(ctx.node.inputs))
    sources = [*range(2, 2 + count), *range(2 + 2 * count, len(ctx.node.inputs))]
    return [_input(ctx, index) for index in sources]


def _schema(
    name: str,
    since: int,
    infer: InferFn,
    *attributes: Attribute,
    inputs: tuple[int, int] = (1, 1),
    outputs: tuple[int, int] = (1, 1),
    domain: str = "",
) -> OpSchema:
    return OpSchema(name, domain, since, inputs, outputs, attributes, infer)


def _float(name: str, default: float) -> Attribute:  # or REQUIRED
    """A float attribute; a default rounded to float32, as ONNX stores float attributes."""
    value = default if default is REQUIRED else float(np.float32(default))
    return Attribute(name, "float", value)


_INT, _STRING = "int", "string"
_SEED = Attribute("seed", "float")
_same = same_as_input(0)

SCHEMAS: list[OpSchema] = [
    _schema(
        "CumProd", 26, _same, Attribute("exclusive", _INT, 0), Attribute("reverse", _INT, 0), inputs=(2, 2)
    ),
    _schema("Det", 11, _infer_det),
    _schema("BitCast", 26, _infer_bit_cast, Attribute("to", _INT, REQUIRED)),
    _schema("Scatter", 9, _same, Attribute("axis", _INT, 0), inputs=(3, 3)),
    _schema(
        "TensorScatter",
        24,
        _same,
        Attribute("axis", _INT, -2),
        Attribute("mode", _STRING, "linear"),
        inputs=(2, 3),
    ),
    _schema("Shrink", 9, _same, _float("bias", 0.0), _float("lambd", 0.5)),
    _schema("LpNormalization", 1, _same, Attribute("axis", _INT, -1), Attribute("p", _INT, 2)),
    _schema("Bernoulli", 15, _typed_like, Attribute("dtype", _INT), _SEED),
    _schema(
        "RandomUniform",
        1,
        _infer_random,
        Attribute("dtype", _INT, FLOAT_CODE),
        _float("high", 1.0),
        _float("low", 0.0),
        _SEED,
        Attribute("shape", "ints", REQUIRED),
        inputs=(0, 0),
    ),
    _schema(
        "RandomNormal",
        1,
        _infer_random,
        Attribute("dtype", _INT, FLOAT_CODE),
        _float("mean", 0.0),
        _float("scale", 1.0),
        _SEED,
        Attribute("shape", "ints", REQUIRED),
        inputs=(0, 0),
    ),
    _schema(
        "RandomUniformLike",
        1,
        _typed_like,
        Attribute("dtype", _INT),
        _float("high", 1.0),
        _float("low", 0.0),
        _SEED,
    ),
    _schema(
        "RandomNormalLike",
        1,
        _typed_like,
        Attribute("dtype", _INT),
        _float("mean", 0.0),
        _float("scale", 1.0),
        _SEED,
    ),
    _schema(
        "Multinomial",
        7,
        _infer_multinomial,
        Attribute("dtype", _INT, INT32_CODE),
        Attribute("sample_size", _INT, 1),
        _SEED,
    ),
    _schema(
        "CausalConvWithState",
        27,
        _infer_causal_conv,
        Attribute("activation", _STRING, "none"),
        inputs=(2, 4),
        outputs=(2, 2),
    ),
    _schema(
        "Adagrad",
        1,
        _infer_optimizer,
        _float("decay_factor", 0.0),
        _float("epsilon", 1e-6),
        _float("norm_coefficient", 0.0),
        inputs=(5, -1),
        outputs=(2, -1),
        domain=TRAINING_DOMAIN,
    ),
    _schema(
        "Momentum",
        1,
        _infer_optimizer,
        _float("alpha", REQUIRED),
        _float("beta", REQUIRED),
        Attribute("mode", _STRING, REQUIRED),
        _float("norm_coefficient", REQUIRED),
        inputs=(5, -1),
        outputs=(2, -1),
        domain=TRAINING_DOMAIN,
    ),
    _schema(
        "Adam",
        1,
        _infer_optimizer,
        _float("alpha", 0.9),
        _float("beta", 0.999),
        _float("epsilon", 1e-6),
        _float("norm_coefficient", 0.0),
        _float("norm_coefficient_post", 0.0),
        inputs=(6, -1),
        outputs=(3, -1),
        domain=TRAINING_DOMAIN,
    ),
]
