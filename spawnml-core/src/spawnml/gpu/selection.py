"""Operators whose output size depends on the data: NonZero, Unique and NonMaxSuppression.

Each counts on the device what it will write, turns the counts into offsets there, and reads
back one number, the total, to size its output: a counted synchronisation (it shows in
:meth:`GPUBackend.traffic` as four bytes from the device), as ``nonzero`` is in GPU
frameworks. Everything else stays on the device.

Unique compares slices pairwise, one thread per slice (quadratic in the number of slices):
made for the sizes Unique sees in models (token ids, labels, small vocabularies).
NonMaxSuppression ranks each class's scores, one thread per box counting those that go before it,
and selects greedily, one thread per batch item and class.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.library.chain import step
from ..kernel.library.selection import (
    box_corners,
    count_nonzero,
    nms_select,
    nms_triples,
    nonzero_coordinates,
    running_offsets,
    score_order,
    unique_first,
    unique_place,
)
from .array import DeviceArray
from .fused import run_chain
from .host import to_host
from .shapes import axis_index
from .table import GPU_KERNELS, GPUContext, concatenate

#: Elements one thread of NonZero's counting and writing kernels walks.
BLOCK = 256
INT64 = np.dtype(np.int64)


def _offsets(ctx: GPUContext, counts: DeviceArray) -> tuple[DeviceArray, int]:
    """The exclusive running sums of ``counts`` (on the device) and their total, read back."""
    offsets = ctx.backend.empty(counts.shape, np.dtype(np.int32))
    total = ctx.backend.empty((1,), np.dtype(np.int32))
    ctx.backend.launch(running_offsets.specialize(), [counts, offsets, total], (1,), rows=counts.size)
    return offsets, int(ctx.backend.to_numpy(total)[0])


def _nonzero_count(ctx: GPUContext, x: DeviceArray) -> tuple[DeviceArray, int, int]:
    """The offsets of each block of ``x``'s non-zero elements, their total, and the block count."""
    blocks = -(-x.size // BLOCK)
    counts = ctx.backend.empty((blocks,), np.dtype(np.int32))
    k = count_nonzero.specialize(T=x.elem, BLOCK=BLOCK)
    ctx.backend.launch_flat(k, [x, counts], blocks, size=x.size)
    offsets, total = _offsets(ctx, counts)
    return offsets, total, blocks


@GPU_KERNELS.register("NonZero", since=9)
def nonzero(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    """The coordinates of the non-zero elements, ``(rank, count)`` in row-major order; a scalar
    counts as a vector of one element."""
    shape = x.shape or (1,)
    if not x.size:
        return ctx.backend.empty((len(shape), 0), INT64)
    offsets, total, blocks = _nonzero_count(ctx, x)
    out = ctx.backend.empty((len(shape), total), INT64)
    if total:
        k = nonzero_coordinates.specialize(T=x.elem, BLOCK=BLOCK, RANK=len(shape))
        dims = ctx.backend.constant(shape)
        ctx.backend.launch_flat(k, [x, offsets, dims, out], blocks, size=x.size, total=total)
    return out


@GPU_KERNELS.register("Unique", since=11)
def unique(ctx: GPUContext, x: DeviceArray) -> tuple[DeviceArray, DeviceArray, DeviceArray, DeviceArray]:
    """The distinct elements (or slices along ``axis``), sorted or in order of first occurrence,
    with the index of each one's first occurrence, each input's place among them, and counts."""
    axis = ctx.attrs.get("axis")
    if axis is None:
        outer, rows, inner, source = 1, x.size, 1, x.view((x.size,))
    else:
        axis = axis_index(int(axis), len(x.shape))
        outer, rows, inner = math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1 :])
        source = x
    found = 0
    first = ctx.backend.empty((rows,), np.dtype(np.int32))
    flags = ctx.backend.empty((rows,), np.dtype(np.int32))
    slice_size = outer * inner
    floats = x.elem.is_float
    nans = (
        run_chain(ctx, (step("IsNaN", [0], "int32"),), [source], "is_nan")
        if floats and x.size
        else ctx.backend.constant([0], np.int32)  # not read
    )
    if rows:
        k = unique_first.specialize(T=x.elem, NANS=floats)
        ctx.backend.launch_flat(k, [source, nans, first, flags], rows, inner=inner, slice_size=slice_size)
        found = _nonzero_count(ctx, flags)[1]
    y_shape = (found,) if axis is None else (*x.shape[:axis], found, *x.shape[axis + 1 :])
    y = ctx.backend.empty(y_shape, x.dtype)
    indices, counts = (ctx.backend.empty((found,), INT64) for _ in range(2))
    inverse = ctx.backend.empty((rows,), INT64)
    if found:
        k = unique_place.specialize(T=x.elem, SORTED=bool(ctx.attrs.get("sorted", 1)), NANS=floats)
        buffers = [source, nans, first, flags, y, indices, inverse, counts]
        ctx.backend.launch_flat(k, buffers, rows, inner=inner, slice_size=slice_size, found=found)
    return y, indices, inverse, counts


def _check_box_format(node: Node, opset: int) -> str | None:
    code = node.attrs.get("center_point_box", 0)
    return None if code in (0, 1) else f"center_point_box={code} is not 0 (corners) or 1 (centre and size)"


def _thresholds(ctx: GPUContext, iou: DeviceArray | None, score: DeviceArray | None) -> DeviceArray:
    """The IoU and score thresholds side by side on the device (0 where not given)."""
    zero = np.zeros(1, np.float32)
    given = [ctx.backend.from_numpy(zero) if t is None or not t.size else t.view((1,)) for t in (iou, score)]
    return concatenate(ctx, given, 0)


@GPU_KERNELS.register("NonMaxSuppression", since=10, check=_check_box_format, dtypes=(np.float32,))
def non_max_suppression(
    ctx: GPUContext,
    boxes: DeviceArray,
    scores: DeviceArray,
    max_output_boxes_per_class: DeviceArray | None = None,
    iou_threshold: DeviceArray | None = None,
    score_threshold: DeviceArray | None = None,
) -> DeviceArray:
    """The ``(batch, class, box)`` triples of the boxes each class keeps: best score first (the
    lower index on ties), skipping any box that overlaps a kept one by more than the IoU
    threshold, at most ``max_output_boxes_per_class`` of them, above the score threshold if given.

    The limit is read on the host (it sizes scratch memory; free for an initializer); the
    thresholds stay on the device."""
    if (
        len(boxes.shape) != 3
        or boxes.shape[2] != 4
        or len(scores.shape) != 3
        or scores.shape[::2] != boxes.shape[:2]
    ):
        raise InvalidArgumentError(
            f"NonMaxSuppression boxes {list(boxes.shape)} and scores {list(scores.shape)} "
            "are not (B, N, 4) and (B, C, N)"
        )
    batches, count = boxes.shape[:2]
    given = (
        None if max_output_boxes_per_class is None else to_host(ctx, max_output_boxes_per_class).reshape(-1)
    )
    limit = min(max(int(given[0]) if given is not None and given.size else 0, 0), count)
    rows = batches * scores.shape[1]
    if not limit or not rows:
        return ctx.backend.empty((0, 3), INT64)
    corners = ctx.backend.empty(boxes.shape, boxes.dtype)
    center = bool(ctx.attrs.get("center_point_box", 0))
    ctx.backend.launch_flat(box_corners.specialize(CENTER=center), [boxes, corners], batches * count)
    nans = run_chain(ctx, (step("IsNaN", [0], "int32"),), [scores], "is_nan")
    order = ctx.backend.empty(scores.shape, np.dtype(np.int32))
    ctx.backend.launch_flat(
        score_order.specialize(), [scores, nans, order], scores.size, boxes_per_batch=count
    )
    floor = score_threshold is not None and score_threshold.size > 0
    thresholds = _thresholds(ctx, iou_threshold, score_threshold)
    chosen = ctx.backend.empty((rows, limit), np.dtype(np.int32))
    counts = ctx.backend.empty((rows,), np.dtype(np.int32))
    k = nms_select.specialize(FLOOR=floor)
    scalars = {"classes": scores.shape[1], "boxes_per_batch": count, "limit": limit}
    ctx.backend.launch_flat(k, [corners, scores, nans, order, thresholds, chosen, counts], rows, **scalars)
    offsets, total = _offsets(ctx, counts)
    out = ctx.backend.empty((total, 3), INT64)
    if total:
        buffers = [chosen, counts, offsets, out]
        ctx.backend.launch_flat(nms_triples.specialize(), buffers, rows, classes=scores.shape[1], limit=limit)
    return out
