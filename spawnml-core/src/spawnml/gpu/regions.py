"""RoiAlign and DeformConv on the GPU: bilinear samples at computed positions, one thread per
output element (:mod:`spawnml.kernel.library.regions`).

DeformConv runs 2-D convolutions (the form the operator has in detection models); other ranks
are refused at load when the attributes say so, and at run time otherwise.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.ir import Kernel, Scalar
from ..kernel.library.regions import deform_conv, roi_align
from ..ops.shapes import as_text
from .array import DeviceArray
from .table import FLOATS, GPU_KERNELS, GPUContext
from .vision import Windows


def _check_roi_align(node: Node, opset: int) -> str | None:
    mode = as_text(node.attrs.get("mode", "avg"))
    if mode not in ("avg", "max"):
        return f"mode {mode!r} is not avg or max"
    transform = as_text(node.attrs.get("coordinate_transformation_mode", "half_pixel"))
    if transform not in ("half_pixel", "output_half_pixel"):
        return f"coordinate_transformation_mode {transform!r} is not half_pixel or output_half_pixel"
    return None


@GPU_KERNELS.register("RoiAlign", since=10, check=_check_roi_align, dtypes=(*FLOATS, np.float64))
def roi_align_(ctx: GPUContext, x: DeviceArray, rois: DeviceArray, batch_indices: DeviceArray) -> DeviceArray:
    """The regions ``rois`` of the images ``batch_indices`` pooled to ``output_height`` by
    ``output_width`` bins; before opset 16 coordinates are not shifted by half a pixel."""
    count = batch_indices.size
    if len(x.shape) != 4 or rois.shape != (count, 4):
        raise InvalidArgumentError(
            f"RoiAlign takes images (N, C, H, W) and rois (R, 4) for R batch indices, got {list(x.shape)}, "
            f"{list(rois.shape)} and {count} indices"
        )
    attrs = ctx.attrs
    height, width = int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1))
    default = "half_pixel" if ctx.opset >= 16 else "output_half_pixel"
    half_pixel = as_text(attrs.get("coordinate_transformation_mode", default)) == "half_pixel"
    y = ctx.backend.empty((count, x.shape[1], height, width), x.dtype)
    k = roi_align.specialize(T=x.elem, MAX=as_text(attrs.get("mode", "avg")) == "max", HALF_PIXEL=half_pixel)
    scalars = {
        "C": x.shape[1],
        "H": x.shape[2],
        "W": x.shape[3],
        "OH": height,
        "OW": width,
        "ratio": int(attrs.get("sampling_ratio", 0)),
        "spatial_scale": float(attrs.get("spatial_scale", 1.0)),
    }
    ctx.backend.launch_flat(k, [x, rois, batch_indices, y], y.size, **scalars)
    return y


def _check_deform_conv(node: Node, opset: int) -> str | None:
    lengths = {
        name: len(node.attrs[name])
        for name in ("kernel_shape", "strides", "dilations")
        if node.attrs.get(name)
    }
    if node.attrs.get("pads"):
        lengths["pads"] = len(node.attrs["pads"]) // 2
    if any(length != 2 for length in lengths.values()):
        return f"only 2-D deformable convolutions run on the GPU ({lengths})"
    if node.attrs.get("group", 1) < 1 or node.attrs.get("offset_group", 1) < 1:
        return "group and offset_group must be positive"
    return None


@cache
def _deform_kernel(elem: Scalar, constants: tuple[tuple[str, int], ...], masked: bool) -> Kernel:
    """The kernel for the height and width entries of a :class:`Windows`' constants."""
    return deform_conv.specialize(T=elem, MASK=masked, **{k: v for k, v in constants if k[1] in "HW"})


@GPU_KERNELS.register("DeformConv", since=19, check=_check_deform_conv, dtypes=(*FLOATS, np.float64))
def deform_conv_(
    ctx: GPUContext,
    x: DeviceArray,
    w: DeviceArray,
    offset: DeviceArray,
    bias: DeviceArray | None = None,
    mask: DeviceArray | None = None,
) -> DeviceArray:
    """A grouped 2-D convolution whose every tap reads the input at its offset position."""
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise InvalidArgumentError(
            f"DeformConv on the GPU is 2-D: input {list(x.shape)} and weight {list(w.shape)} are not 4-D"
        )
    kernel = [int(k) for k in ctx.attrs.get("kernel_shape") or w.shape[2:]]
    windows = Windows.of(ctx, x, kernel)
    (batch, channels), out_channels = x.shape[:2], w.shape[0]
    groups, offset_groups = int(ctx.attrs.get("group", 1)), int(ctx.attrs.get("offset_group", 1))
    out = tuple(windows.out[1:])
    taps = kernel[0] * kernel[1]
    if offset.shape != (batch, offset_groups * taps * 2, *out) or channels % offset_groups:
        raise InvalidArgumentError(
            f"offset of shape {list(offset.shape)} does not fit the convolution of {list(x.shape)} by "
            f"{list(w.shape)} in {offset_groups} offset groups"
        )
    if channels != w.shape[1] * groups or out_channels % groups:
        raise InvalidArgumentError(
            f"weight of shape {list(w.shape)} does not fit {channels} channels in {groups} groups"
        )
    if mask is not None and mask.shape != (batch, offset_groups * taps, *out):
        raise InvalidArgumentError(
            f"mask of shape {list(mask.shape)} does not fit offsets {list(offset.shape)}"
        )
    y = ctx.backend.empty((batch, out_channels, *out), x.dtype)
    masked = mask is not None
    if mask is None:
        mask = ctx.backend.from_numpy(np.zeros(1, x.dtype))  # not read
    if bias is None:
        bias = ctx.backend.from_numpy(np.zeros(out_channels, x.dtype))
    buffers = [x, w, offset, mask, bias, y]
    scalars = {
        "C": channels,
        "M": out_channels,
        "G": groups,
        "OG": offset_groups,
        "H": x.shape[2],
        "W": x.shape[3],
        "OH": out[0],
        "OW": out[1],
        "ph": windows.begins[1],
        "pw": windows.begins[2],
    }
    ctx.backend.launch_flat(_deform_kernel(x.elem, windows.constants, masked), buffers, y.size, **scalars)
    return y
