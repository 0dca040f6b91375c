"""Neural-network operators: matrix products, convolution, pooling, normalization,
quantization and resizing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...dtypes import from_onnx
from ...ir import Dim, Node, Shape
from ..schema import REQUIRED, Attribute, InferenceContext, OpSchema, TensorType
from ..shapes import (
    as_text,
    broadcast,
    normalize_axis,
    resize_output,
    same_as_input,
    sliding_windows,
    transposed_windows,
)

INT32 = np.dtype(np.int32)
INT64 = np.dtype(np.int64)
UINT8 = np.dtype(np.uint8)
FLOAT32 = np.dtype(np.float32)

#: Where an output's element type comes from: an input index, or a fixed dtype.
DtypeSource = int | np.dtype
InferFn = Callable[[InferenceContext], list[TensorType]]


def _dtype(ctx: InferenceContext, source: DtypeSource) -> np.dtype | None:
    if isinstance(source, np.dtype):
        return source
    value = ctx.input(source)
    return value.dtype if value is not None else None


def _shape(ctx: InferenceContext, index: int) -> Shape:
    value = ctx.input(index)
    return value.shape if value is not None else None


# --- matrix products ---------------------------------------------------------------


def matmul_shape(a: Shape, b: Shape) -> Shape:
    """The shape of ``numpy.matmul`` of two possibly symbolic shapes."""
    if not a or not b:  # unknown rank, or a scalar (which matmul refuses)
        return None
    left, right = (1, *a) if len(a) == 1 else a, (*b, 1) if len(b) == 1 else b
    batch = broadcast(left[:-2], right[:-2])
    if batch is None:
        return None
    rows = () if len(a) == 1 else (left[-2],)
    cols = () if len(b) == 1 else (right[-1],)
    return (*batch, *rows, *cols)


def _matmul(a: int, b: int, dtype: DtypeSource) -> InferFn:
    def infer(ctx: InferenceContext) -> list[TensorType]:
        return [TensorType(_dtype(ctx, dtype), matmul_shape(_shape(ctx, a), _shape(ctx, b)))]

    return infer


def _infer_gemm(ctx: InferenceContext) -> list[TensorType]:
    a, b = _shape(ctx, 0), _shape(ctx, 1)
    rows = a[1 if ctx.attrs.get("transA") else 0] if a is not None and len(a) == 2 else None
    cols = b[0 if ctx.attrs.get("transB") else 1] if b is not None and len(b) == 2 else None
    return [TensorType(_dtype(ctx, 0), (rows, cols))]


# --- convolution and pooling -------------------------------------------------------


def _kernel(ctx: InferenceContext, weight: int | None) -> Sequence[Dim] | None:
    if "kernel_shape" in ctx.attrs:
        return ctx.attrs["kernel_shape"]
    shape = _shape(ctx, weight) if weight is not None else None
    return shape[2:] if shape is not None else None


def _windowed(
    ctx: InferenceContext, x: int, weight: int | None, channels: Dim, transposed: bool = False
) -> Shape:
    """``(N, channels, *spatial)`` of a convolution or pooling output."""
    shape = _shape(ctx, x)
    if shape is None or len(shape) < 3:
        return None
    kernel = _kernel(ctx, weight)
    spatial: tuple[Dim, ...] = (None,) * (len(shape) - 2)
    ints = [k for k in kernel if isinstance(k, int)] if kernel is not None else []
    if kernel is not None and len(ints) == len(kernel):
        windows = transposed_windows if transposed else sliding_windows
        spatial = tuple(out for out, _, _ in windows(shape[2:], ctx.attrs, ints))
    return (shape[0], channels, *spatial)


def _conv(x: int, weight: int, dtype: DtypeSource) -> InferFn:
    def infer(ctx: InferenceContext) -> list[TensorType]:
        w = _shape(ctx, weight)
        channels = w[0] if w is not None else None
        return [TensorType(_dtype(ctx, dtype), _windowed(ctx, x, weight, channels))]

    return infer


def _infer_conv_transpose(ctx: InferenceContext) -> list[TensorType]:
    w = _shape(ctx, 1)
    per_group = w[1] if w is not None else None
    group = ctx.attrs.get("group", 1)
    channels = per_group * group if isinstance(per_group, int) else (per_group if group == 1 else None)
    return [TensorType(_dtype(ctx, 0), _windowed(ctx, 0, 1, channels, transposed=True))]


def _infer_pool(ctx: InferenceContext) -> list[TensorType]:
    x = _shape(ctx, 0)
    shape = _windowed(ctx, 0, None, x[1] if x is not None and len(x) > 1 else None)
    return [TensorType(_dtype(ctx, 0), shape), TensorType(INT64, shape)]


def _infer_global_pool(ctx: InferenceContext) -> list[TensorType]:
    x = _shape(ctx, 0)
    shape = None if x is None else (*x[:2], *(1,) * (len(x) - 2))
    return [TensorType(_dtype(ctx, 0), shape)]


# --- normalization -----------------------------------------------------------------


def _infer_batch_norm(ctx: InferenceContext) -> list[TensorType]:
    return [ctx.input(0) or TensorType(None, None), *(ctx.input(i) or TensorType(None, None) for i in (3, 4))]


def _infer_layer_norm(ctx: InferenceContext) -> list[TensorType]:
    x = ctx.input(0) or TensorType(None, None)
    stats_dtype = from_onnx(ctx.attrs["stash_type"]) if ctx.attrs["stash_type"] else x.dtype
    stats: Shape = None
    if x.shape is not None:
        axis = normalize_axis(ctx.attrs["axis"], len(x.shape))
        stats = (*x.shape[:axis], *(1,) * (len(x.shape) - axis))
    return [x, TensorType(stats_dtype, stats), TensorType(stats_dtype, stats)]


# --- quantization ------------------------------------------------------------------


def _infer_quantize(ctx: InferenceContext) -> list[TensorType]:
    zero_point = ctx.input(2)
    if zero_point is not None:
        dtype = zero_point.dtype
    elif ctx.attrs.get("output_dtype"):
        dtype = from_onnx(ctx.attrs["output_dtype"])
    else:
        dtype = UINT8
    return [TensorType(dtype, _shape(ctx, 0))]


def _infer_dequantize(ctx: InferenceContext) -> list[TensorType]:
    code = ctx.attrs.get("output_dtype")
    dtype = from_onnx(code) if code else _dtype(ctx, 1)
    return [TensorType(dtype, _shape(ctx, 0))]


def _infer_dynamic_quantize(ctx: InferenceContext) -> list[TensorType]:
    return [TensorType(UINT8, _shape(ctx, 0)), TensorType(FLOAT32, ()), TensorType(UINT8, ())]


# --- resizing ----------------------------------------------------------------------


def _constant_list(ctx: InferenceContext, index: int) -> list[float] | None:
    value = ctx.constant(index)
    return None if value is None or value.size == 0 else value.ravel().tolist()


def _infer_resize(scales_index: int | None, sizes_index: int | None) -> InferFn:
    def infer(ctx: InferenceContext) -> list[TensorType]:
        x = _shape(ctx, 0)
        if x is None:
            return [TensorType(_dtype(ctx, 0), None)]
        scales = ctx.attrs.get("scales")
        if scales_index is not None:
            scales = _constant_list(ctx, scales_index)
        sizes = _constant_list(ctx, sizes_index) if sizes_index is not None else None
        if scales is None and sizes is None:
            return [TensorType(_dtype(ctx, 0), (None,) * len(x))]
        out, _ = resize_output(
            x,
            scales,
            sizes,
            ctx.attrs.get("axes"),
            as_text(ctx.attrs.get("keep_aspect_ratio_policy", "stretch")),
        )
        return [TensorType(_dtype(ctx, 0), out)]

    return infer


def _infer_upsample_v1(ctx: InferenceContext) -> list[TensorType]:
    x = _shape(ctx, 0)
    scales = [1.0, 1.0, ctx.attrs["height_scale"], ctx.attrs["width_scale"]]
    out = None if x is None else resize_output(x, scales, None, None, "stretch")[0]
    return [TensorType(_dtype(ctx, 0), out)]


# --- schemas -----------------------------------------------------------------------


def _window_attrs(kernel_required: bool = False) -> tuple[Attribute, ...]:
    return (
        Attribute("auto_pad", "string", "NOTSET"),
        Attribute("kernel_shape", "ints", REQUIRED if kernel_required else None),
        Attribute("pads", "ints"),
        Attribute("strides", "ints"),
    )


CONV_ATTRS = (*_window_attrs(), Attribute("dilations", "ints"), Attribute("group", "int", 1))
DILATED_POOL_ATTRS = (*_window_attrs(True), Attribute("ceil_mode", "int", 0), Attribute("dilations", "ints"))
EPSILON = Attribute("epsilon", "float", 1e-5)
STASH_TYPE = Attribute("stash_type", "int", 1)
RESIZE_ATTRS_11 = (
    Attribute("mode", "string", "nearest"),
    Attribute("coordinate_transformation_mode", "string", "half_pixel"),
    Attribute("cubic_coeff_a", "float", -0.75),
    Attribute("exclude_outside", "int", 0),
    Attribute("extrapolation_value", "float", 0.0),
    Attribute("nearest_mode", "string", "round_prefer_floor"),
)
RESIZE_ATTRS_18 = (
    *RESIZE_ATTRS_11,
    Attribute("antialias", "int", 0),
    Attribute("axes", "ints"),
    Attribute("keep_aspect_ratio_policy", "string", "stretch"),
)
#: Resize's interpolation modes, coordinate transformations, nearest roundings and aspect policies.
RESIZE_MODES = frozenset({"nearest", "linear", "cubic"})
CROP = "tf_crop_and_resize"
COORDINATE_TRANSFORMS = frozenset(
    {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn", "align_corners"}
    | {"asymmetric", CROP}
)
NEAREST_MODES = frozenset({"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
ASPECT_POLICIES = frozenset({"stretch", "not_larger", "not_smaller"})
#: Nearest rounding of Upsample and Resize-10: floor when enlarging, ceil when shrinking.
LEGACY_NEAREST = "legacy"


def _unknown(node: Node, attribute: str, default: str, known: frozenset[str]) -> str | None:
    value = as_text(node.attrs.get(attribute, default))
    return None if value in known else f"{attribute} {value!r} is not supported"


def check_legacy_resize(node: Node, opset: int) -> str | None:
    """Why an Upsample or Resize-10 node cannot run (None if it can): its mode."""
    return _unknown(node, "mode", "nearest", frozenset({"nearest", "linear"}))


def check_resize(node: Node, opset: int) -> str | None:
    """Why a Resize node cannot run as given (None if it can): its modes, the opsets of two
    coordinate transformations, and antialiasing only when interpolating."""
    transform = as_text(node.attrs.get("coordinate_transformation_mode", "half_pixel"))
    if transform == "half_pixel_symmetric" and opset < 19:
        return "coordinate_transformation_mode 'half_pixel_symmetric' needs opset 19"
    if transform == "tf_half_pixel_for_nn" and opset >= 13:
        return "coordinate_transformation_mode 'tf_half_pixel_for_nn' was removed in opset 13"
    if node.attrs.get("antialias", 0) and as_text(node.attrs.get("mode", "nearest")) == "nearest":
        return "antialias needs mode 'linear' or 'cubic'"
    return (
        _unknown(node, "mode", "nearest", RESIZE_MODES)
        or _unknown(node, "coordinate_transformation_mode", "half_pixel", COORDINATE_TRANSFORMS)
        or _unknown(node, "nearest_mode", "round_prefer_floor", NEAREST_MODES)
        or _unknown(node, "keep_aspect_ratio_policy", "stretch", ASPECT_POLICIES)
    )


def legacy_resize_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """Upsample's and Resize-10's attributes as those of a later Resize."""
    return {
        "mode": as_text(attrs.get("mode", "nearest")),
        "coordinate_transformation_mode": "asymmetric",
        "nearest_mode": LEGACY_NEAREST,
    }


BATCH_NORM_ATTRS = (EPSILON, Attribute("momentum", "float", 0.9))
QUANTIZE_AXIS = Attribute("axis", "int", 1)
BLOCK_SIZE = Attribute("block_size", "int", 0)
OUTPUT_DTYPE = Attribute("output_dtype", "int", 0)
SATURATE = Attribute("saturate", "int", 1)
QUANTIZE_ATTRS_21 = (QUANTIZE_AXIS, BLOCK_SIZE, OUTPUT_DTYPE, SATURATE)


def _resize(version: int, inputs: tuple[int, int], attrs: tuple[Attribute, ...]) -> OpSchema:
    return OpSchema(
        "Resize", since_version=version, inputs=inputs, attributes=attrs, infer=_infer_resize(2, 3)
    )


def _batch_norm(version: int, outputs: int, *extra: Attribute) -> OpSchema:
    return OpSchema(
        "BatchNormalization",
        since_version=version,
        inputs=(5, 5),
        outputs=(1, outputs),
        attributes=(*BATCH_NORM_ATTRS, *extra),
        infer=_infer_batch_norm,
    )


SCHEMAS: list[OpSchema] = [
    OpSchema("MatMul", inputs=(2, 2), infer=_matmul(0, 1, 0)),
    *(
        OpSchema(
            "Gemm",
            since_version=version,
            inputs=(low, 3),
            attributes=(
                Attribute("alpha", "float", 1.0),
                Attribute("beta", "float", 1.0),
                Attribute("transA", "int", 0),
                Attribute("transB", "int", 0),
                *extra,
            ),
            infer=_infer_gemm,
        )
        for version, low, extra in (
            (1, 3, (Attribute("broadcast", "int", 0),)),
            (7, 3, ()),
            (11, 2, ()),
        )
    ),
    OpSchema("Conv", inputs=(2, 3), attributes=CONV_ATTRS, infer=_conv(0, 1, 0)),
    OpSchema(
        "ConvTranspose",
        inputs=(2, 3),
        attributes=(*CONV_ATTRS, Attribute("output_padding", "ints"), Attribute("output_shape", "ints")),
        infer=_infer_conv_transpose,
    ),
    OpSchema("MaxPool", attributes=_window_attrs(True), infer=_infer_pool),
    OpSchema(
        "MaxPool",
        since_version=8,
        outputs=(1, 2),
        attributes=(*_window_attrs(True), Attribute("storage_order", "int", 0)),
        infer=_infer_pool,
    ),
    OpSchema(
        "MaxPool",
        since_version=10,
        outputs=(1, 2),
        attributes=(*DILATED_POOL_ATTRS, Attribute("storage_order", "int", 0)),
        infer=_infer_pool,
    ),
    OpSchema("AveragePool", attributes=_window_attrs(True), infer=_infer_pool),
    OpSchema(
        "AveragePool",
        since_version=7,
        attributes=(*_window_attrs(True), Attribute("count_include_pad", "int", 0)),
        infer=_infer_pool,
    ),
    OpSchema(
        "AveragePool",
        since_version=10,
        attributes=(
            *_window_attrs(True),
            Attribute("ceil_mode", "int", 0),
            Attribute("count_include_pad", "int", 0),
        ),
        infer=_infer_pool,
    ),
    OpSchema(
        "AveragePool",
        since_version=19,
        attributes=(*DILATED_POOL_ATTRS, Attribute("count_include_pad", "int", 0)),
        infer=_infer_pool,
    ),
    OpSchema("GlobalAveragePool", infer=_infer_global_pool),
    OpSchema("GlobalMaxPool", infer=_infer_global_pool),
    OpSchema("LpPool", attributes=(*_window_attrs(), Attribute("p", "float", 2.0)), infer=_infer_pool),
    OpSchema(
        "LpPool",
        since_version=2,
        attributes=(*_window_attrs(True), Attribute("p", "int", 2)),
        infer=_infer_pool,
    ),
    OpSchema(
        "LpPool",
        since_version=18,
        attributes=(*DILATED_POOL_ATTRS, Attribute("p", "int", 2)),
        infer=_infer_pool,
    ),
    _batch_norm(
        1,
        5,
        Attribute("consumed_inputs", "ints", REQUIRED),
        Attribute("is_test", "int", 0),
        Attribute("spatial", "int", 1),
    ),
    _batch_norm(6, 5, Attribute("is_test", "int", 0), Attribute("spatial", "int", 1)),
    _batch_norm(7, 5, Attribute("spatial", "int", 1)),
    _batch_norm(9, 5),
    _batch_norm(14, 3, Attribute("training_mode", "int", 0)),
    OpSchema(
        "InstanceNormalization",
        inputs=(3, 3),
        attributes=(EPSILON, Attribute("consumed_inputs", "ints")),
        infer=same_as_input(),
    ),
    OpSchema(
        "InstanceNormalization", since_version=6, inputs=(3, 3), attributes=(EPSILON,), infer=same_as_input()
    ),
    OpSchema(
        "LayerNormalization",
        since_version=17,
        inputs=(2, 3),
        outputs=(1, 3),
        attributes=(Attribute("axis", "int", -1), EPSILON, STASH_TYPE),
        infer=_infer_layer_norm,
    ),
    OpSchema(
        "GroupNormalization",
        since_version=18,
        inputs=(3, 3),
        attributes=(EPSILON, Attribute("num_groups", "int", REQUIRED)),
        infer=same_as_input(),
    ),
    OpSchema(
        "GroupNormalization",
        since_version=21,
        inputs=(3, 3),
        attributes=(EPSILON, Attribute("num_groups", "int", REQUIRED), STASH_TYPE),
        infer=same_as_input(),
    ),
    OpSchema(
        "LRN",
        attributes=(
            Attribute("alpha", "float", 1e-4),
            Attribute("beta", "float", 0.75),
            Attribute("bias", "float", 1.0),
            Attribute("size", "int", REQUIRED),
        ),
        infer=same_as_input(),
    ),
    OpSchema(
        "MeanVarianceNormalization",
        since_version=9,
        attributes=(Attribute("axes", "ints", [0, 2, 3]),),
        infer=same_as_input(),
    ),
    *(
        OpSchema(
            "QuantizeLinear", since_version=version, inputs=(2, 3), attributes=attrs, infer=_infer_quantize
        )
        for version, attrs in (
            (10, ()),
            (13, (QUANTIZE_AXIS,)),
            (19, (QUANTIZE_AXIS, SATURATE)),
            (21, QUANTIZE_ATTRS_21),
            (23, (*QUANTIZE_ATTRS_21, Attribute("precision", "int", 0))),
        )
    ),
    *(
        OpSchema(
            "DequantizeLinear",
            since_version=version,
            inputs=(2, 3),
            attributes=attrs,
            infer=_infer_dequantize,
        )
        for version, attrs in (
            (10, ()),
            (13, (QUANTIZE_AXIS,)),
            (21, (QUANTIZE_AXIS, BLOCK_SIZE)),
            (23, (QUANTIZE_AXIS, BLOCK_SIZE, OUTPUT_DTYPE)),
        )
    ),
    OpSchema("DynamicQuantizeLinear", since_version=11, outputs=(3, 3), infer=_infer_dynamic_quantize),
    OpSchema("MatMulInteger", since_version=10, inputs=(2, 4), infer=_matmul(0, 1, INT32)),
    OpSchema("ConvInteger", since_version=10, inputs=(2, 4), attributes=CONV_ATTRS, infer=_conv(0, 1, INT32)),
    OpSchema("QLinearMatMul", since_version=10, inputs=(8, 8), infer=_matmul(0, 3, 7)),
    OpSchema("QLinearConv", since_version=10, inputs=(8, 9), attributes=CONV_ATTRS, infer=_conv(0, 3, 7)),
    OpSchema(
        "Resize",
        since_version=10,
        inputs=(2, 2),
        attributes=(Attribute("mode", "string", "nearest"),),
        infer=_infer_resize(1, None),
    ),
    _resize(11, (3, 4), RESIZE_ATTRS_11),
    _resize(13, (1, 4), RESIZE_ATTRS_11),
    _resize(18, (1, 4), RESIZE_ATTRS_18),
    _resize(19, (1, 4), RESIZE_ATTRS_18),
    OpSchema(
        "Upsample",
        attributes=(
            Attribute("height_scale", "float", REQUIRED),
            Attribute("mode", "string", "nearest"),
            Attribute("width_scale", "float", REQUIRED),
        ),
        infer=_infer_upsample_v1,
    ),
    OpSchema(
        "Upsample",
        since_version=7,
        attributes=(Attribute("mode", "string", "nearest"), Attribute("scales", "floats", REQUIRED)),
        infer=_infer_resize(None, None),
    ),
    OpSchema(
        "Upsample",
        since_version=9,
        inputs=(2, 2),
        attributes=(Attribute("mode", "string", "nearest"),),
        infer=_infer_resize(1, None),
    ),
]
