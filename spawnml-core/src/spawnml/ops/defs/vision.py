"""Vision ai.onnx operators: sampling grids, deformable convolution, regions of interest,
box suppression, unfolding and unpooling, cropping and image decoding.

Only the versions whose attributes or inputs changed have their own schema.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import InvalidGraphError
from ...ir import Dim, Shape
from ..schema import REQUIRED, Attribute, InferenceContext, OpSchema, TensorType
from ..shapes import as_text, constant_ints, normalize_axis

INT64 = np.dtype(np.int64)
UINT8 = np.dtype(np.uint8)

#: Channels ImageDecoder produces for each pixel format.
PIXEL_CHANNELS = {"RGB": 3, "BGR": 3, "Grayscale": 1}


def _dtype(ctx: InferenceContext, index: int) -> np.dtype | None:
    value = ctx.input(index)
    return None if value is None else value.dtype


def _shape(ctx: InferenceContext, index: int) -> Shape:
    value = ctx.input(index)
    return None if value is None else value.shape


def _dim(shape: Shape, axis: int) -> Dim:
    return shape[axis] if shape is not None and len(shape) > axis else None


def _given(ctx: InferenceContext, index: int) -> bool:
    return index < len(ctx.node.inputs) and bool(ctx.node.inputs[index])


# ---------------------------------------------------------------------------- shape inference


def _infer_grid_sample(ctx: InferenceContext) -> list[TensorType]:
    grid = _shape(ctx, 1)
    shape = None if grid is None else (grid[0], _dim(_shape(ctx, 0), 1), *grid[1:-1])
    return [TensorType(_dtype(ctx, 0), shape)]


def _infer_affine_grid(ctx: InferenceContext) -> list[TensorType]:
    theta = _shape(ctx, 0)
    size: Sequence[Dim] | None = constant_ints(ctx, 1)
    if size is None:
        length = _dim(_shape(ctx, 1), 0)
        if not isinstance(length, int):
            return [TensorType(_dtype(ctx, 0), None)]
        size = [None] * length
    if len(size) not in (4, 5):
        raise InvalidGraphError(f"AffineGrid size must list 4 or 5 dims, got {len(size)}")
    return [TensorType(_dtype(ctx, 0), (_dim(theta, 0), *size[2:], len(size) - 2))]


def _infer_deform_conv(ctx: InferenceContext) -> list[TensorType]:
    x, offset = _shape(ctx, 0), _shape(ctx, 2)
    if offset is not None:
        spatial = offset[2:]
    elif x is not None:
        spatial = (None,) * (len(x) - 2)
    else:
        return [TensorType(_dtype(ctx, 0), None)]
    return [TensorType(_dtype(ctx, 0), (_dim(x, 0), _dim(_shape(ctx, 1), 0), *spatial))]


def _infer_roi_align(ctx: InferenceContext) -> list[TensorType]:
    rois = _dim(_shape(ctx, 1), 0)
    count = rois if rois is not None else _dim(_shape(ctx, 2), 0)
    shape = (count, _dim(_shape(ctx, 0), 1), ctx.attrs["output_height"], ctx.attrs["output_width"])
    return [TensorType(_dtype(ctx, 0), shape)]


def _infer_non_max_suppression(ctx: InferenceContext) -> list[TensorType]:
    return [TensorType(INT64, (None, 3))]


def _infer_col2im(ctx: InferenceContext) -> list[TensorType]:
    x = _shape(ctx, 0)
    image: Sequence[Dim] | None = constant_ints(ctx, 1)
    block = constant_ints(ctx, 2)
    if image is None:
        count = _dim(_shape(ctx, 1), 0)
        image = [None] * count if isinstance(count, int) else None
    columns = _dim(x, 1)
    channels = columns // math.prod(block) if isinstance(columns, int) and block else None
    shape = None if image is None else (_dim(x, 0), channels, *image)
    return [TensorType(_dtype(ctx, 0), shape)]


def unpooled_size(size: int, kernel: int, stride: int, pads: tuple[int, int]) -> int:
    """The length MaxUnpool gives an axis of ``size`` when no output shape is given."""
    return (size - 1) * stride + kernel - pads[0] - pads[1]


def unpool_attrs(attrs: dict[str, Any]) -> tuple[list[int], list[int], list[int]]:
    """MaxUnpool's kernel, strides and pads (begins then ends), with defaults."""
    kernel = [int(k) for k in attrs["kernel_shape"]]
    strides = [int(s) for s in attrs.get("strides") or [1] * len(kernel)]
    pads = [int(p) for p in attrs.get("pads") or [0] * (2 * len(kernel))]
    if len(strides) != len(kernel) or len(pads) != 2 * len(kernel):
        raise InvalidGraphError(f"MaxUnpool strides or pads do not match a {len(kernel)}-d kernel")
    return kernel, strides, pads


def _infer_max_unpool(ctx: InferenceContext) -> list[TensorType]:
    x = _shape(ctx, 0)
    if _given(ctx, 2):
        given = constant_ints(ctx, 2)
        length = _dim(_shape(ctx, 2), 0)
        shape = tuple(given) if given is not None else ((None,) * length if isinstance(length, int) else None)
        return [TensorType(_dtype(ctx, 0), shape)]
    if x is None:
        return [TensorType(_dtype(ctx, 0), None)]
    kernel, strides, pads = unpool_attrs(ctx.attrs)
    count = len(kernel)
    spatial = tuple(
        unpooled_size(size, kernel[i], strides[i], (pads[i], pads[i + count]))
        if isinstance(size, int)
        else None
        for i, size in enumerate(x[2:])
    )
    return [TensorType(_dtype(ctx, 0), (*x[:2], *spatial))]


def _infer_center_crop_pad(ctx: InferenceContext) -> list[TensorType]:
    x = _shape(ctx, 0)
    if x is None:
        return [TensorType(_dtype(ctx, 0), None)]
    listed = ctx.attrs.get("axes")
    axes = range(len(x)) if listed is None else [normalize_axis(axis, len(x)) for axis in listed]
    sizes: Sequence[Dim] = constant_ints(ctx, 1) or [None] * len(axes)
    if len(sizes) != len(axes):
        raise InvalidGraphError(f"CenterCropPad shape lists {len(sizes)} sizes for {len(axes)} axes")
    dims = list(x)
    for axis, size in zip(axes, sizes, strict=True):
        dims[axis] = size
    return [TensorType(_dtype(ctx, 0), tuple(dims))]


def _infer_image_decoder(ctx: InferenceContext) -> list[TensorType]:
    channels = PIXEL_CHANNELS.get(as_text(ctx.attrs["pixel_format"]))
    return [TensorType(UINT8, (None, None, channels))]


# ---------------------------------------------------------------------------- the schemas


def _schema(
    name: str, since: int, infer, *attributes: Attribute, inputs: tuple[int, int] = (1, 1)
) -> OpSchema:
    return OpSchema(name, "", since, inputs, (1, 1), attributes, infer)


_INT, _INTS, _FLOAT, _STRING = "int", "ints", "float", "string"
_ALIGN_CORNERS = Attribute("align_corners", _INT, 0)
_PADDING_MODE = Attribute("padding_mode", _STRING, "zeros")
_ROI_ALIGN_ATTRS = (
    Attribute("mode", _STRING, "avg"),
    Attribute("output_height", _INT, 1),
    Attribute("output_width", _INT, 1),
    Attribute("sampling_ratio", _INT, 0),
    Attribute("spatial_scale", _FLOAT, 1.0),
)

SCHEMAS: list[OpSchema] = [
    _schema(
        "GridSample",
        16,
        _infer_grid_sample,
        _ALIGN_CORNERS,
        Attribute("mode", _STRING, "bilinear"),
        _PADDING_MODE,
        inputs=(2, 2),
    ),
    _schema(
        "GridSample",
        20,
        _infer_grid_sample,
        _ALIGN_CORNERS,
        Attribute("mode", _STRING, "linear"),
        _PADDING_MODE,
        inputs=(2, 2),
    ),
    _schema("AffineGrid", 20, _infer_affine_grid, _ALIGN_CORNERS, inputs=(2, 2)),
    _schema(
        "DeformConv",
        19,
        _infer_deform_conv,
        Attribute("dilations", _INTS),
        Attribute("group", _INT, 1),
        Attribute("kernel_shape", _INTS),
        Attribute("offset_group", _INT, 1),
        Attribute("pads", _INTS),
        Attribute("strides", _INTS),
        inputs=(3, 5),
    ),
    _schema("RoiAlign", 10, _infer_roi_align, *_ROI_ALIGN_ATTRS, inputs=(3, 3)),
    _schema(
        "RoiAlign",
        16,
        _infer_roi_align,
        *_ROI_ALIGN_ATTRS,
        Attribute("coordinate_transformation_mode", _STRING, "half_pixel"),
        inputs=(3, 3),
    ),
    _schema(
        "NonMaxSuppression",
        10,
        _infer_non_max_suppression,
        Attribute("center_point_box", _INT, 0),
        inputs=(2, 5),
    ),
    _schema(
        "Col2Im",
        18,
        _infer_col2im,
        Attribute("dilations", _INTS),
        Attribute("pads", _INTS),
        Attribute("strides", _INTS),
        inputs=(3, 3),
    ),
    _schema(
        "MaxUnpool",
        9,
        _infer_max_unpool,
        Attribute("kernel_shape", _INTS, REQUIRED),
        Attribute("pads", _INTS),
        Attribute("strides", _INTS),
        inputs=(2, 3),
    ),
    _schema("CenterCropPad", 18, _infer_center_crop_pad, Attribute("axes", _INTS), inputs=(2, 2)),
    _schema("ImageDecoder", 20, _infer_image_decoder, Attribute("pixel_format", _STRING, "RGB")),
]
