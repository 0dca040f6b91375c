"""Kernels of the operators whose output size depends on the data: NonZero, Unique and
NonMaxSuppression.

Each runs in three phases: a kernel counts what will be written (per block of elements, per
slice or per class), :func:`running_offsets` turns the counts into exclusive offsets and their
total, the caller reads back that one total to size the output, and a last kernel writes each
part at its offset. Thread-per-row kernels launch ``rows`` threads over a 2-D grid of ``width``
threads per grid row; :func:`running_offsets` is one thread.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, f32, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, global_id


@kernel(workgroup=(1,))
def running_offsets(counts: ReadBuffer[i32], offsets: Buffer[i32], total: Buffer[i32], rows: u32):
    """``offsets[r]``: the sum of ``counts`` before ``r``; ``total[0]``: the sum of all."""
    if global_id(0) == 0:
        running = i32(0)
        for r in range(rows):
            offsets[r] = running
            running += counts[r]
        total[0] = running


# NonZero --------------------------------------------------------------------------------------
@kernel(workgroup=(64,))
def count_nonzero(
    x: ReadBuffer[T],
    counts: Buffer[i32],
    rows: u32,
    width: u32,
    size: u32,
    T: Const[Scalar],
    BLOCK: Const[int],
):
    """``counts[b]``: the non-zero elements among the ``BLOCK`` of block ``b`` (of ``size`` in all)."""
    b = global_id(1) * width + global_id(0)
    if b < rows:
        start = b * u32(BLOCK)
        found = i32(0)
        for i in range(start, min(start + u32(BLOCK), size)):
            if x[i] != T(0):
                found += 1
        counts[b] = found


@kernel(workgroup=(64,))
def nonzero_coordinates(
    x: ReadBuffer[T],
    offsets: ReadBuffer[i32],
    dims: ReadBuffer[u32],
    out: Buffer[i32],
    rows: u32,
    width: u32,
    size: u32,
    total: u32,
    T: Const[Scalar],
    BLOCK: Const[int],
    RANK: Const[int],
):
    """The coordinates of block ``b``'s non-zero elements, in order, from column ``offsets[b]`` of
    ``out`` (``RANK`` rows of ``total``); ``dims`` = the input's shape."""
    b = global_id(1) * width + global_id(0)
    if b < rows:
        start = b * u32(BLOCK)
        at = u32(offsets[b])
        for i in range(start, min(start + u32(BLOCK), size)):
            if x[i] != T(0):
                rest = i
                for d in range(RANK - 1, -1, -1):
                    out[u32(d) * total + at] = i32(rest % dims[d])
                    rest = rest // dims[d]
                at += u32(1)


# Unique -------------------------------------------------------------------------------------------
# Slice ``i`` of ``x`` viewed as ``(outer, rows, inner)`` is ``x[:, i, :]``, ``slice_size`` elements.
# With ``NANS``, ``nans`` flags x's NaN elements (1; computed by the IsNaN scalar operator, as WGSL
# lets compilers assume comparisons see no NaN): NaN equals NaN and sorts above every number, as
# in numpy's unique. Without, ``nans`` is not read.


@kernel(workgroup=(64,))
def unique_first(
    x: ReadBuffer[T],
    nans: ReadBuffer[i32],
    first: Buffer[i32],
    unique: Buffer[i32],
    rows: u32,
    width: u32,
    inner: u32,
    slice_size: u32,
    T: Const[Scalar],
    NANS: Const[bool],
):
    """``first[i]``: the lowest slice equal to slice ``i``; ``unique[i]``: 1 where that is ``i``."""
    i = global_id(1) * width + global_id(0)
    if i < rows:
        found = i
        for j in range(i):
            same = True
            for e in range(slice_size):
                at = ((e // inner) * rows) * inner + e % inner
                nan_a = False
                nan_b = False
                if NANS:
                    nan_a = nans[at + i * inner] != 0
                    nan_b = nans[at + j * inner] != 0
                if nan_a != nan_b or (not nan_a and x[at + i * inner] != x[at + j * inner]):
                    same = False
                    break
            if same:
                found = j
                break
        first[i] = i32(found)
        unique[i] = 1 if found == i else 0


@kernel(workgroup=(64,))
def unique_place(
    x: ReadBuffer[T],
    nans: ReadBuffer[i32],
    first: ReadBuffer[i32],
    unique: ReadBuffer[i32],
    y: Buffer[T],
    indices: Buffer[i32],
    inverse: Buffer[i32],
    counts: Buffer[i32],
    rows: u32,
    width: u32,
    inner: u32,
    slice_size: u32,
    found: u32,
    T: Const[Scalar],
    SORTED: Const[bool],
    NANS: Const[bool],
):
    """Slice ``i``'s place ``p`` among the ``found`` distinct slices (by value when ``SORTED``,
    else by first occurrence) goes to ``inverse[i]``; the first of each kind also writes itself to
    ``y`` at ``p``, its index to ``indices[p]`` and how many slices equal it to ``counts[p]``."""
    i = global_id(1) * width + global_id(0)
    if i < rows:
        own = u32(first[i])
        place = i32(0)
        if SORTED:
            for j in range(rows):
                if unique[j] == 1:
                    below = False
                    for e in range(slice_size):
                        at = ((e // inner) * rows) * inner + e % inner
                        a = x[at + j * inner]
                        b = x[at + i * inner]
                        nan_a = False
                        nan_b = False
                        if NANS:
                            nan_a = nans[at + j * inner] != 0
                            nan_b = nans[at + i * inner] != 0
                        if nan_a != nan_b or (not nan_a and a != b):
                            below = nan_b or (not nan_a and a < b)
                            break
                    if below:
                        place += 1
        else:
            for j in range(own):
                place += unique[j]
        p = u32(place)
        inverse[i] = place
        if own == i:
            indices[p] = i32(i)
            same = i32(0)
            for k in range(i, rows):
                if u32(first[k]) == i:
                    same += 1
            counts[p] = same
            for e in range(slice_size):
                outer = e // inner
                y[(outer * found + p) * inner + e % inner] = x[(outer * rows + i) * inner + e % inner]


# NonMaxSuppression --------------------------------------------------------------------------------
@kernel(workgroup=(64,))
def box_corners(boxes: ReadBuffer[f32], corners: Buffer[f32], n: u32, width: u32, CENTER: Const[bool]):
    """Each box as ``(y_min, x_min, y_max, x_max)``, from corners in either order or, when
    ``CENTER``, from ``(x_center, y_center, width, height)``."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        a = i * u32(4)
        if CENTER:
            x = boxes[a]
            y = boxes[a + u32(1)]
            half_w = boxes[a + u32(2)] / 2.0
            half_h = boxes[a + u32(3)] / 2.0
            corners[a] = y - half_h
            corners[a + u32(1)] = x - half_w
            corners[a + u32(2)] = y + half_h
            corners[a + u32(3)] = x + half_w
        else:
            corners[a] = min(boxes[a], boxes[a + u32(2)])
            corners[a + u32(1)] = min(boxes[a + u32(1)], boxes[a + u32(3)])
            corners[a + u32(2)] = max(boxes[a], boxes[a + u32(2)])
            corners[a + u32(3)] = max(boxes[a + u32(1)], boxes[a + u32(3)])


@kernel(workgroup=(64,))
def score_order(
    scores: ReadBuffer[f32],
    nans: ReadBuffer[i32],
    order: Buffer[i32],
    n: u32,
    width: u32,
    boxes_per_batch: u32,
):
    """``order`` lists each row's boxes best score first, the lower index first on ties and NaN
    scores last (``nans`` flags them): thread ``i`` counts the boxes of its row that go before it
    and writes its index at that place."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        own = i % boxes_per_batch
        row = i - own
        mine = scores[i]
        place = u32(0)
        if nans[i] == 0:
            for j in range(boxes_per_batch):
                theirs = scores[row + j]
                if nans[row + j] == 0 and (theirs > mine or (theirs == mine and j < own)):
                    place += u32(1)
        else:
            for j in range(boxes_per_batch):
                if nans[row + j] == 0 or j < own:
                    place += u32(1)
        order[row + place] = i32(own)


@kernel(workgroup=(64,))
def nms_select(
    corners: ReadBuffer[f32],
    scores: ReadBuffer[f32],
    nans: ReadBuffer[i32],
    order: ReadBuffer[i32],
    thresholds: ReadBuffer[f32],
    chosen: Buffer[i32],
    counts: Buffer[i32],
    rows: u32,
    width: u32,
    classes: u32,
    boxes_per_batch: u32,
    limit: u32,
    FLOOR: Const[bool],
):
    """Greedy suppression for row ``r`` (one batch item and class): its candidates in the order of
    :func:`score_order`, each kept unless it overlaps a kept box by an intersection over union above
    ``thresholds[0]`` (or, with ``FLOOR``, scores ``thresholds[1]`` or less, or NaN), up to
    ``limit``; ``chosen`` has ``limit`` slots per row, ``counts[r]`` says how many were filled.
    Pairs without a positive intersection, area or union never overlap."""
    r = global_id(1) * width + global_id(0)
    if r < rows:
        batch = (r // classes) * boxes_per_batch
        row = r * boxes_per_batch
        taken = u32(0)
        for t in range(boxes_per_batch):
            if taken >= limit:
                break
            box = u32(order[row + t])
            keep = True
            if FLOOR:
                keep = nans[row + box] == 0 and scores[row + box] > thresholds[1]
            if keep:
                a = (batch + box) * u32(4)
                area_a = (corners[a + u32(2)] - corners[a]) * (corners[a + u32(3)] - corners[a + u32(1)])
                for s in range(taken):
                    b = (batch + u32(chosen[r * limit + s])) * u32(4)
                    area_b = (corners[b + u32(2)] - corners[b]) * (corners[b + u32(3)] - corners[b + u32(1)])
                    tall = min(corners[a + u32(2)], corners[b + u32(2)]) - max(corners[a], corners[b])
                    wide = min(corners[a + u32(3)], corners[b + u32(3)]) - max(
                        corners[a + u32(1)], corners[b + u32(1)]
                    )
                    inter = tall * wide
                    combined = area_a + area_b - inter
                    apart = min(tall, wide) <= 0.0 or area_a <= 0.0 or area_b <= 0.0 or combined <= 0.0
                    if not apart and inter / combined > thresholds[0]:
                        keep = False
                        break
                if keep:
                    chosen[r * limit + taken] = i32(box)
                    taken += u32(1)
        counts[r] = i32(taken)


@kernel(workgroup=(64,))
def nms_triples(
    chosen: ReadBuffer[i32],
    counts: ReadBuffer[i32],
    offsets: ReadBuffer[i32],
    out: Buffer[i32],
    rows: u32,
    width: u32,
    classes: u32,
    limit: u32,
):
    """Row ``r``'s kept boxes as ``(batch, class, box)`` triples from triple ``offsets[r]`` of ``out``."""
    r = global_id(1) * width + global_id(0)
    if r < rows:
        at = u32(offsets[r]) * u32(3)
        for s in range(u32(counts[r])):
            out[at + s * u32(3)] = i32(r // classes)
            out[at + s * u32(3) + u32(1)] = i32(r % classes)
            out[at + s * u32(3) + u32(2)] = chosen[r * limit + s]
