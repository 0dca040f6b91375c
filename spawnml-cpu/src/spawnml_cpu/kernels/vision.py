"""CPU kernels of the vision operators: GridSample, AffineGrid, DeformConv, RoiAlign,
NonMaxSuppression, Col2Im, MaxUnpool, CenterCropPad and ImageDecoder.

GridSample and DeformConv share one sampler: every output point reads a few taps per
spatial axis (1 nearest, 2 linear, 4 cubic), each resolved by a padding mode, and sums
the taps of all axes weighted by the product of their weights.
"""

from __future__ import annotations

import importlib.util
import io
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from spawnml.backend import CheckFn, KernelContext
from spawnml.errors import InvalidGraphError
from spawnml.ir import Node
from spawnml.ops.defs.vision import PIXEL_CHANNELS, unpool_attrs, unpooled_size
from spawnml.ops.shapes import as_text, normalize_axis, window_attrs

from .checks import one_of, valid_when
from .nn_common import Windows, compute_dtype, matmul, per_channel
from .table import KERNELS

#: Keys' cubic convolution coefficient, as PyTorch and ONNX use for GridSample.
CUBIC_A = -0.75
PADDING_MODES = {"zeros", "border", "reflection"}
#: GridSample's interpolation modes by their opset-16 and opset-20 names.
GRID_MODES = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest"}
GRID_MODES_20 = {"linear": "linear", "cubic": "cubic", "nearest": "nearest"}

#: Taps of one axis: ``(input index, weight)`` pairs, arrays shaped like the coordinates.
Taps = list[tuple[np.ndarray, np.ndarray]]


def _ints(array: np.ndarray) -> list[int]:
    return [int(item) for item in np.asarray(array).reshape(-1)]


def _all_of(*checks: CheckFn) -> CheckFn:
    def check(node: Node, opset: int) -> str | None:
        return next((reason for c in checks if (reason := c(node, opset)) is not None), None)

    return check


# ---------------------------------------------------------------------------- sampling


def _nearest_taps(coord: np.ndarray) -> Taps:
    return [(np.trunc(coord).astype(np.int64), np.ones_like(coord))]


def _linear_taps(coord: np.ndarray) -> Taps:
    low = np.floor(coord)
    fraction = coord - low
    return [(low.astype(np.int64), 1 - fraction), (low.astype(np.int64) + 1, fraction)]


def _cubic_taps(coord: np.ndarray) -> Taps:
    low = np.floor(coord)
    t = coord - low

    def near(d: np.ndarray) -> np.ndarray:  # |distance| <= 1
        return ((CUBIC_A + 2) * d - (CUBIC_A + 3)) * d * d + 1

    def far(d: np.ndarray) -> np.ndarray:  # 1 < |distance| < 2
        return ((CUBIC_A * d - 5 * CUBIC_A) * d + 8 * CUBIC_A) * d - 4 * CUBIC_A

    base = low.astype(np.int64)
    return [(base - 1, far(t + 1)), (base, near(t)), (base + 1, near(1 - t)), (base + 2, far(2 - t))]


TAPS: dict[str, Callable[[np.ndarray], Taps]] = {
    "nearest": _nearest_taps,
    "linear": _linear_taps,
    "cubic": _cubic_taps,
}


def _reflect(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """``x`` folded into ``[low, high]`` by reflecting at the borders as often as needed."""
    span = high - low
    if span <= 0:
        return np.full_like(x, low)
    distance = np.where(x < low, low - x, x - high)
    flips = np.floor(distance / span)
    rest = distance - flips * span
    even = flips % 2 == 0
    below = np.where(even, low + rest, high - rest)
    above = np.where(even, high - rest, low + rest)
    return np.where(x < low, below, np.where(x > high, above, x))


def _borders(size: int, align_corners: bool) -> tuple[float, float]:
    """The extent of an axis in pixel coordinates: pixel centres, or pixel edges."""
    return (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)


def _resolve(
    index: np.ndarray, size: int, padding: str, align_corners: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """A tap index moved inside ``[0, size)`` by the padding mode, and which taps count."""
    if padding == "reflection":
        reflected = _reflect(index.astype(np.float64), *_borders(size, align_corners))
        index = np.trunc(reflected).astype(np.int64)
    inside = (index >= 0) & (index < size) if padding == "zeros" else None
    return np.clip(index, 0, size - 1), inside


def interpolate(
    image: np.ndarray, coords: Sequence[np.ndarray], mode: str, padding: str, align_corners: bool
) -> np.ndarray:
    """Sample ``image`` ``(B, C, *spatial)`` at pixel coordinates: one ``(B, *out)`` array per
    spatial axis. Returns ``(B, C, *out)``."""
    per_axis = []
    for coord, size in zip(coords, image.shape[2:], strict=True):
        taps = []
        for index, weight in TAPS[mode](coord):
            index, inside = _resolve(index, size, padding, align_corners)
            taps.append((index, weight if inside is None else weight * inside))
        per_axis.append(taps)
    channels_last = np.moveaxis(image, 1, -1)
    batch = np.arange(image.shape[0]).reshape(-1, *(1,) * (coords[0].ndim - 1))
    out = np.zeros((*coords[0].shape, image.shape[1]), image.dtype)
    for combination in itertools.product(*per_axis):
        combined = np.asarray(math.prod(w for _, w in combination))
        out += channels_last[(batch, *(i for i, _ in combination))] * combined[..., None]
    return np.moveaxis(out, -1, 1)


def _unnormalize(grid: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    """Pixel coordinates of normalized ``[-1, 1]`` grid values on an axis of ``size``."""
    if align_corners:
        return (grid + 1) / 2 * (size - 1)
    return ((grid + 1) * size - 1) / 2


def _fold(coord: np.ndarray, size: int, padding: str, align_corners: bool) -> np.ndarray:
    """Coordinates outside the axis clamped (border) or reflected (reflection) inside."""
    low, high = _borders(size, align_corners)
    if padding == "border":
        return np.where((coord < low) | (coord > high), np.clip(coord, 0, size - 1), coord)
    if padding == "reflection":
        return _reflect(coord, low, high)
    return coord


def _grid_modes(opset: int) -> dict[str, str]:
    return GRID_MODES if opset < 20 else GRID_MODES_20


def _grid_sample_check(node: Node, opset: int) -> str | None:
    mode = as_text(node.attrs.get("mode", "bilinear" if opset < 20 else "linear"))
    if mode not in _grid_modes(opset):
        return f"mode {mode!r} is not one of {sorted(_grid_modes(opset))} at opset {opset}"
    padding = as_text(node.attrs.get("padding_mode", "zeros"))
    if padding not in PADDING_MODES:
        return f"padding_mode {padding!r} is not one of {sorted(PADDING_MODES)}"
    return None


@KERNELS.register("GridSample", since=16, check=_grid_sample_check)
def grid_sample(ctx: KernelContext, x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    spatial = x.shape[2:]
    if grid.shape[0] != x.shape[0] or grid.shape[-1] != len(spatial) or grid.ndim != x.ndim:
        raise ValueError(f"grid of shape {grid.shape} does not sample an input of shape {x.shape}")
    mode = _grid_modes(ctx.opset)[as_text(ctx.attrs["mode"])]
    padding, align = as_text(ctx.attrs["padding_mode"]), bool(ctx.attrs["align_corners"])
    work = compute_dtype(x.dtype)
    coords = []
    for axis, size in enumerate(spatial):  # the grid lists coordinates innermost axis first
        coord = _unnormalize(grid[..., len(spatial) - 1 - axis].astype(work), size, align)
        if mode == "nearest":
            coord = np.rint(coord)
        coords.append(_fold(coord, size, padding, align))
    return interpolate(x.astype(work, copy=False), coords, mode, padding, align).astype(x.dtype)


def _grid_line(size: int, align_corners: bool) -> np.ndarray:
    """The normalized coordinates of the pixels of one axis."""
    if align_corners:
        return -1 + np.arange(size) * (2 / (size - 1) if size > 1 else 0)
    return (2 * np.arange(size) + 1) / size - 1


@KERNELS.register("AffineGrid", since=20)
def affine_grid(ctx: KernelContext, theta: np.ndarray, size: np.ndarray) -> np.ndarray:
    dims = _ints(size)
    rank = len(dims) - 2
    if rank not in (2, 3) or theta.shape != (dims[0], rank, rank + 1):
        raise ValueError(f"theta of shape {theta.shape} does not fit an output of size {dims}")
    work = compute_dtype(theta.dtype)
    lines = [_grid_line(n, bool(ctx.attrs["align_corners"])).astype(work) for n in dims[2:]]
    mesh = np.meshgrid(*lines, indexing="ij")
    points = np.stack([*reversed(mesh), np.ones_like(mesh[0])], axis=-1)
    grid = np.einsum("...j,nkj->n...k", points, theta.astype(work, copy=False))
    return grid.astype(theta.dtype)


# ---------------------------------------------------------------------------- deformable convolution


def _deform_conv_attrs(node: Node) -> None:
    """Groups must be positive; strides, dilations and pads must match ``kernel_shape``."""
    if node.attrs.get("group", 1) < 1 or node.attrs.get("offset_group", 1) < 1:
        raise InvalidGraphError("group and offset_group must be positive")
    if "kernel_shape" in node.attrs:
        window_attrs(node.attrs, node.attrs["kernel_shape"])


@KERNELS.register("DeformConv", since=19, check=valid_when(_deform_conv_attrs))
def deform_conv(
    ctx: KernelContext,
    x: np.ndarray,
    weight: np.ndarray,
    offset: np.ndarray,
    bias: np.ndarray | None = None,
    mask: np.ndarray | None = None,
) -> np.ndarray:
    """Convolution whose every tap samples the input bilinearly at an offset position."""
    kernel = [int(k) for k in ctx.attrs.get("kernel_shape") or weight.shape[2:]]
    windows = Windows.of(ctx.attrs, x.shape[2:], kernel)
    (n, channels), out = x.shape[:2], offset.shape[2:]
    groups, offset_groups = ctx.attrs["group"], ctx.attrs["offset_group"]
    taps, rank = math.prod(kernel), len(kernel)
    if out != windows.out or offset.shape[1] != offset_groups * taps * rank or channels % offset_groups:
        raise ValueError(f"offset of shape {offset.shape} does not fit the convolution of {x.shape}")
    if channels != weight.shape[1] * groups or weight.shape[0] % groups:
        raise ValueError(
            f"weight of shape {weight.shape} does not fit {channels} channels in {groups} groups"
        )
    work = compute_dtype(x.dtype)
    images = x.astype(work, copy=False).reshape(n * offset_groups, channels // offset_groups, *x.shape[2:])
    shifts = offset.astype(work, copy=False).reshape(n * offset_groups, taps, rank, *out)
    scales = np.ones((n, offset_groups, taps, *out), work) if mask is None else mask.astype(work, copy=False)
    scales = scales.reshape(n, offset_groups, 1, taps, *out)
    starts = np.meshgrid(*(windows.starts(axis).astype(work) for axis in range(rank)), indexing="ij")
    columns = np.empty((n, channels, taps, *out), work)
    for k, tap in enumerate(np.ndindex(*kernel)):
        coords = [starts[a] + tap[a] * windows.dilations[a] + shifts[:, k, a] for a in range(rank)]
        sampled = interpolate(images, coords, "linear", "zeros", align_corners=True)
        sampled = sampled.reshape(n, offset_groups, channels // offset_groups, *out) * scales[:, :, :, k]
        columns[:, :, k] = sampled.reshape(n, channels, *out)
    filters = weight.astype(work, copy=False).reshape(groups, weight.shape[0] // groups, -1)
    y = matmul(filters, columns.reshape(n, groups, filters.shape[2], -1)).reshape(n, -1, *out)
    if bias is not None:
        y += per_channel(bias.astype(work, copy=False), y.ndim)
    return y.astype(x.dtype)


# ---------------------------------------------------------------------------- regions of interest


@dataclass(frozen=True)
class _RoiSamples:
    """RoiAlign's sample points along one axis of a region, as bilinear taps.

    ``index`` and ``weight`` are ``(bins, samples, 2)``: the low and high neighbour of each
    sample point, relative to the start of ``span``, the stretch of the axis they touch.
    """

    index: np.ndarray
    weight: np.ndarray
    per_bin: int
    span: slice

    @classmethod
    def of(cls, start: float, extent: float, bins: int, ratio: int, size: int) -> _RoiSamples:
        """Points beyond one pixel outside the image weigh nothing; the rest are clamped."""
        samples = ratio if ratio > 0 else math.ceil(extent / bins)
        step = extent / bins
        points = start + step * (np.arange(bins)[:, None] + (np.arange(samples) + 0.5) / samples)
        valid = (points >= -1) & (points <= size)
        points = np.maximum(points, 0)
        low = np.floor(points).astype(np.int64)
        edge = low >= size - 1
        low = np.where(edge, size - 1, low)
        high = np.where(edge, size - 1, low + 1)
        fraction = np.where(edge, 0, points - low)
        index = np.stack([low, high], axis=-1)
        first = int(index.min()) if index.size else 0
        span = slice(first, int(index.max()) + 1 if index.size else 0)
        weight = np.stack([1 - fraction, fraction], axis=-1) * valid[..., None]
        return cls(index - first, weight, samples, span)

    def matrix(self, dtype: np.dtype) -> np.ndarray:
        """``(bins, span)``: the summed weight each bin gives each position of the span."""
        matrix = np.zeros((self.index.shape[0], self.span.stop - self.span.start), dtype)
        np.add.at(matrix, (np.arange(self.index.shape[0])[:, None, None], self.index), self.weight)
        return matrix


def _roi_average(image: np.ndarray, rows: _RoiSamples, columns: _RoiSamples) -> np.ndarray:
    """The mean of the bilinear samples of each bin: two small matrix products."""
    total = rows.matrix(image.dtype) @ image @ columns.matrix(image.dtype).T
    return total / max(rows.per_bin * columns.per_bin, 1)


def _roi_max(image: np.ndarray, rows: _RoiSamples, columns: _RoiSamples) -> np.ndarray:
    """The largest weighted corner of any sample of each bin (onnxruntime's definition).

    Weights are never negative, so the largest product is found along the columns first,
    then along the rows.
    """
    if not rows.per_bin or not columns.per_bin:
        return np.zeros((image.shape[0], rows.index.shape[0], columns.index.shape[0]), image.dtype)
    across = (image[:, :, columns.index] * columns.weight).max(axis=(-2, -1))
    return (across[:, rows.index] * rows.weight[..., None]).max(axis=(2, 3))


_roi_check = _all_of(
    one_of("mode", "avg", {"avg", "max"}),
    one_of("coordinate_transformation_mode", "half_pixel", {"half_pixel", "output_half_pixel"}),
)


@KERNELS.register("RoiAlign", since=10, check=_roi_check)
def roi_align(ctx: KernelContext, x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray) -> np.ndarray:
    attrs = ctx.attrs
    height, width = attrs["output_height"], attrs["output_width"]
    half_pixel = as_text(attrs.get("coordinate_transformation_mode", "output_half_pixel")) == "half_pixel"
    pool = _roi_max if as_text(attrs["mode"]) == "max" else _roi_average
    if rois.shape != (batch_indices.shape[0], 4):
        raise ValueError(f"rois of shape {rois.shape} do not match {batch_indices.shape[0]} batch indices")
    images = x.astype(compute_dtype(x.dtype), copy=False)
    y = np.empty((rois.shape[0], x.shape[1], height, width), images.dtype)
    for r, (box, image) in enumerate(zip(rois.astype(np.float64), _ints(batch_indices), strict=True)):
        x0, y0, x1, y1 = box * attrs["spatial_scale"] - (0.5 if half_pixel else 0.0)
        extent_y, extent_x = y1 - y0, x1 - x0
        if not half_pixel:  # the legacy mode makes malformed regions one pixel wide
            extent_y, extent_x = max(extent_y, 1.0), max(extent_x, 1.0)
        rows = _RoiSamples.of(y0, extent_y, height, attrs["sampling_ratio"], x.shape[2])
        columns = _RoiSamples.of(x0, extent_x, width, attrs["sampling_ratio"], x.shape[3])
        y[r] = pool(images[image, :, rows.span, columns.span], rows, columns)
    return y.astype(x.dtype)


# ---------------------------------------------------------------------------- box suppression


def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """Boxes as ``(y_min, x_min, y_max, x_max)``, from corners in any order or from centres."""
    if center_point_box:
        x, y, w, h = np.moveaxis(boxes, -1, 0)
        return np.stack([y - h / 2, x - w / 2, y + h / 2, x + w / 2], axis=-1)
    y1, x1, y2, x2 = np.moveaxis(boxes, -1, 0)
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)], -1)


def _overlapping(a: np.ndarray, b: np.ndarray, threshold: np.generic) -> np.ndarray:
    """``(len(a), len(b))``: which pairs of boxes overlap by an intersection over union above
    ``threshold``. Pairs without a positive intersection or area never do."""
    sides = np.minimum(a[:, None, 2:], b[None, :, 2:]) - np.maximum(a[:, None, :2], b[None, :, :2])
    intersection = sides[..., 0] * sides[..., 1]
    area_a, area_b = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]) for boxes in (a, b))
    union = area_a[:, None] + area_b - intersection
    valid = (
        (np.minimum(sides[..., 0], sides[..., 1]) > 0) & (area_a[:, None] > 0) & (area_b > 0) & (union > 0)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        return valid & (intersection / union > threshold)


#: Candidates NonMaxSuppression compares with each other at once.
_NMS_BLOCK = 256


def _select(
    corners: np.ndarray, scores: np.ndarray, limit: int, iou: np.generic, floor: np.generic | None
) -> list[int]:
    """Greedy selection: best score first (lower index on ties), skipping any box that
    overlaps one already selected. Candidates go in blocks: each block is checked against
    the selection at once, then against itself in order."""
    order = np.argsort(-scores, kind="stable")
    if floor is not None:
        order = order[scores[order] > floor]
    chosen: list[int] = []
    for start in range(0, order.size, _NMS_BLOCK):
        if len(chosen) >= limit:
            break
        block = order[start : start + _NMS_BLOCK]
        alive = ~np.asarray(_overlapping(corners[block], corners[chosen], iou).any(axis=1))
        within = _overlapping(corners[block], corners[block], iou)
        for i in range(block.size):
            if alive[i] and len(chosen) < limit:
                chosen.append(int(block[i]))
                alive &= ~within[i]
    return chosen


def _optional_scalar(array: np.ndarray | None) -> np.generic | None:
    return None if array is None or array.size == 0 else array.reshape(-1)[0]


def _box_format(node: Node, opset: int) -> str | None:
    return None if node.attrs.get("center_point_box", 0) in (0, 1) else "center_point_box must be 0 or 1"


@KERNELS.register("NonMaxSuppression", since=10, check=_box_format)
def non_max_suppression(
    ctx: KernelContext,
    boxes: np.ndarray,
    scores: np.ndarray,
    max_output_boxes_per_class: np.ndarray | None = None,
    iou_threshold: np.ndarray | None = None,
    score_threshold: np.ndarray | None = None,
) -> np.ndarray:
    batches, count = boxes.shape[:2]
    if boxes.shape != (batches, count, 4) or scores.ndim != 3 or scores.shape[::2] != (batches, count):
        raise ValueError(f"boxes {boxes.shape} and scores {scores.shape} are not (B, N, 4) and (B, C, N)")
    limit = max(int(_optional_scalar(max_output_boxes_per_class) or 0), 0)
    iou = _optional_scalar(iou_threshold)
    iou = np.float32(0) if iou is None else iou
    floor = _optional_scalar(score_threshold)
    corners = _corners(boxes, ctx.attrs["center_point_box"])
    selected = [
        (batch, kind, index)
        for batch in range(scores.shape[0])
        for kind in range(scores.shape[1])
        for index in _select(corners[batch], scores[batch, kind], limit, iou, floor)
    ]
    return np.array(selected, dtype=np.int64).reshape(-1, 3)


# ---------------------------------------------------------------------------- unfolding and unpooling


@KERNELS.register("Col2Im", since=18)
def col2im(ctx: KernelContext, x: np.ndarray, image_shape: np.ndarray, block_shape: np.ndarray) -> np.ndarray:
    """Sum sliding blocks ``(N, C * prod(block), L)`` back into images ``(N, C, *image)``."""
    image, block = _ints(image_shape), _ints(block_shape)
    rank = len(image)
    strides, dilations, pads = window_attrs(ctx.attrs, block)
    padded = [size + pads[a] + pads[a + rank] for a, size in enumerate(image)]
    counts = [
        (p - (k - 1) * d - 1) // s + 1 for p, k, d, s in zip(padded, block, dilations, strides, strict=True)
    ]
    taps = math.prod(block)
    if x.ndim != 3 or x.shape[1] % taps or x.shape[2] != math.prod(counts) or min(counts) < 1:
        raise ValueError(f"input of shape {x.shape} does not hold blocks {block} of an image {image}")
    work = compute_dtype(x.dtype)
    columns = x.astype(work, copy=False).reshape(x.shape[0], x.shape[1] // taps, *block, *counts)
    out = np.zeros((*columns.shape[:2], *padded), work)
    for tap in np.ndindex(*block):
        region = tuple(
            slice(t * d, t * d + (c - 1) * s + 1, s)
            for t, d, c, s in zip(tap, dilations, counts, strides, strict=True)
        )
        at: tuple[Any, ...] = (..., *region)
        out[at] += columns[(slice(None), slice(None), *tap)]
    crop: tuple[Any, ...] = (..., *(slice(pads[a], pads[a] + size) for a, size in enumerate(image)))
    return out[crop].astype(x.dtype)


@KERNELS.register("MaxUnpool", since=9, check=valid_when(lambda node: unpool_attrs(node.attrs)))
def max_unpool(
    ctx: KernelContext, x: np.ndarray, indices: np.ndarray, output_shape: np.ndarray | None = None
) -> np.ndarray:
    """Scatter pooled values to their flat ``indices`` in the unpooled shape, then pad the
    end of each axis up to ``output_shape`` when given (as ONNX's reference does)."""
    kernel, strides, pads = unpool_attrs(ctx.attrs)
    count = len(kernel)
    if x.ndim != count + 2 or indices.shape != x.shape:
        raise ValueError(f"input {x.shape} and indices {indices.shape} do not fit a {count}-d kernel")
    unpooled = (
        *x.shape[:2],
        *(
            unpooled_size(x.shape[2 + i], kernel[i], strides[i], (pads[i], pads[i + count]))
            for i in range(count)
        ),
    )
    flat = np.zeros(math.prod(unpooled), x.dtype)
    if indices.size and not 0 <= indices.min() <= indices.max() < flat.size:
        raise IndexError(f"indices reach outside the {flat.size} elements of shape {list(unpooled)}")
    flat[indices.reshape(-1)] = x.reshape(-1)
    if output_shape is None:
        return flat.reshape(unpooled)
    target = _ints(output_shape)
    if len(target) != len(unpooled) or any(t < u for t, u in zip(target, unpooled, strict=True)):
        raise ValueError(f"output_shape {target} is smaller than the unpooled shape {list(unpooled)}")
    out = np.zeros(target, x.dtype)
    out[tuple(slice(0, size) for size in unpooled)] = flat.reshape(unpooled)
    return out


# ---------------------------------------------------------------------------- cropping and decoding


@KERNELS.register("CenterCropPad", since=18)
def center_crop_pad(ctx: KernelContext, x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    listed = ctx.attrs.get("axes")
    axes = range(x.ndim) if listed is None else [normalize_axis(axis, x.ndim) for axis in listed]
    sizes = _ints(shape)
    if len(sizes) != len(axes):
        raise ValueError(f"shape lists {len(sizes)} sizes for {len(axes)} axes")
    source, target, dims = [slice(None)] * x.ndim, [slice(None)] * x.ndim, list(x.shape)
    for axis, size in zip(axes, sizes, strict=True):
        have, dims[axis] = x.shape[axis], size
        start = abs(have - size) // 2
        if size < have:
            source[axis] = slice(start, start + size)
        else:
            target[axis] = slice(start, start + have)
    out = np.full(dims, "" if x.dtype.kind == "O" else 0, dtype=x.dtype)
    out[tuple(target)] = x[tuple(source)]
    return out


_pixel_format = one_of("pixel_format", "RGB", PIXEL_CHANNELS)


def _image_decoder_check(node: Node, opset: int) -> str | None:
    if importlib.util.find_spec("PIL") is None:
        return "decoding images needs Pillow, which is not installed (pip install pillow)"
    return _pixel_format(node, opset)


@KERNELS.register("ImageDecoder", since=20, check=_image_decoder_check)
def image_decoder(ctx: KernelContext, encoded: np.ndarray) -> np.ndarray:
    from PIL import Image  # optional: only this kernel needs it, and only when used

    pixel_format = as_text(ctx.attrs["pixel_format"])
    with Image.open(io.BytesIO(encoded.tobytes())) as image:
        pixels = np.array(image.convert("L" if pixel_format == "Grayscale" else "RGB"))
    if pixel_format == "Grayscale":
        return pixels[..., None]
    return pixels[..., ::-1].copy() if pixel_format == "BGR" else pixels
