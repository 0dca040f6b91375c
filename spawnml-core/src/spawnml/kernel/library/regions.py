"""Kernels that sample images bilinearly at computed positions: RoiAlign over regions of interest
and DeformConv, a 2-D convolution whose every tap reads at a learned offset.

One thread per output element, computing in the tensors' float type ``T``; launch ``n`` threads
over a 2-D grid of ``width`` threads per grid row. Images are ``(N, C, H, W)``.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, f32, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, floor, global_id


@kernel(workgroup=(64,))
def roi_align(
    x: ReadBuffer[T],
    rois: ReadBuffer[T],
    batch_indices: ReadBuffer[i32],
    y: Buffer[T],
    n: u32,
    width: u32,
    C: u32,
    H: i32,
    W: i32,
    OH: u32,
    OW: u32,
    ratio: i32,
    spatial_scale: f32,
    T: Const[Scalar],
    MAX: Const[bool],
    HALF_PIXEL: Const[bool],
):
    """``y[r, c, ph, pw]``: the mean (or, with ``MAX``, the largest weighted corner) of a grid of
    bilinear samples in bin ``(ph, pw)`` of region ``r`` (``x0, y0, x1, y1`` in ``rois``, scaled by
    ``spatial_scale``, shifted by half a pixel when ``HALF_PIXEL``, else at least a pixel wide).
    ``ratio`` samples per bin and axis, or ``ceil(bin size)`` when 0; samples more than a pixel
    outside the image weigh nothing, the others are clamped to it."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        pw = i % OW
        ph = (i // OW) % OH
        c = (i // (OW * OH)) % C
        r = i // (OW * OH * C)
        shift = T(0.5) if HALF_PIXEL else T(0)
        scale = T(spatial_scale)
        x0 = rois[r * u32(4)] * scale - shift
        y0 = rois[r * u32(4) + u32(1)] * scale - shift
        extent_x = rois[r * u32(4) + u32(2)] * scale - shift - x0
        extent_y = rois[r * u32(4) + u32(3)] * scale - shift - y0
        if not HALF_PIXEL:
            extent_x = max(extent_x, 1.0)
            extent_y = max(extent_y, 1.0)
        step_y = extent_y / T(OH)
        step_x = extent_x / T(OW)
        rows = ratio if ratio > 0 else i32(-floor(-step_y))
        columns = ratio if ratio > 0 else i32(-floor(-step_x))
        plane = (batch_indices[r] * i32(C) + i32(c)) * H * W
        total = T(0)
        seen = False
        for sy in range(rows):
            py = y0 + step_y * (T(ph) + (T(sy) + 0.5) / T(rows))
            valid_y = py >= -1.0 and py <= T(H)
            py = max(py, 0.0)
            low_y = i32(floor(py))
            high_y = low_y + 1
            fraction_y = py - T(low_y)
            if low_y >= H - 1:
                low_y = H - 1
                high_y = H - 1
                fraction_y = 0.0
            for sx in range(columns):
                px = x0 + step_x * (T(pw) + (T(sx) + 0.5) / T(columns))
                valid = valid_y and px >= -1.0 and px <= T(W)
                px = max(px, 0.0)
                low_x = i32(floor(px))
                high_x = low_x + 1
                fraction_x = px - T(low_x)
                if low_x >= W - 1:
                    low_x = W - 1
                    high_x = W - 1
                    fraction_x = 0.0
                weight_y = T(1) if valid else T(0)
                top = (1.0 - fraction_y) * weight_y
                bottom = fraction_y * weight_y
                left = 1.0 - fraction_x
                top_left = top * left * x[plane + low_y * W + low_x]
                top_right = top * fraction_x * x[plane + low_y * W + high_x]
                bottom_left = bottom * left * x[plane + high_y * W + low_x]
                bottom_right = bottom * fraction_x * x[plane + high_y * W + high_x]
                if MAX:
                    best = max(max(top_left, top_right), max(bottom_left, bottom_right))
                    total = best if not seen else max(total, best)
                    seen = True
                else:
                    total += top_left + top_right + bottom_left + bottom_right
        if not MAX:
            total = total / T(max(rows * columns, 1))
        y[i] = total


@kernel(workgroup=(64,))
def deform_conv(
    x: ReadBuffer[T],
    w: ReadBuffer[T],
    offset: ReadBuffer[T],
    mask: ReadBuffer[T],
    bias: ReadBuffer[T],
    y: Buffer[T],
    n: u32,
    width: u32,
    C: i32,
    M: i32,
    G: i32,
    OG: i32,
    H: i32,
    W: i32,
    OH: i32,
    OW: i32,
    ph: i32,
    pw: i32,
    T: Const[Scalar],
    KH: Const[int],
    KW: Const[int],
    SH: Const[int],
    SW: Const[int],
    DH: Const[int],
    DW: Const[int],
    MASK: Const[bool],
):
    """``y[b, m, oh, ow]``: ``bias[m]`` plus, over the group's channels and the kernel taps, the
    weight times the input sampled bilinearly (zeros outside) at the tap's position moved by its
    ``offset`` (``(N, OG * KH * KW * 2, OH, OW)``, y then x, per offset group ``OG`` of channels),
    scaled by ``mask`` (``(N, OG * KH * KW, OH, OW)``) when ``MASK``."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        j = i32(i)
        ow = j % OW
        oh = (j // OW) % OH
        m = (j // (OW * OH)) % M
        b = j // (OW * OH * M)
        per_group = C // G
        first = (m // (M // G)) * per_group
        taps = KH * KW
        acc = T(0)
        for c in range(per_group):
            channel = first + c
            group = channel // (C // OG)
            plane = (b * C + channel) * H * W
            for kh in range(KH):
                for kw in range(KW):
                    k = (b * OG + group) * taps + kh * KW + kw
                    at = k * 2 * OH * OW + oh * OW + ow
                    py = T(oh * SH - ph + kh * DH) + offset[at]
                    px = T(ow * SW - pw + kw * DW) + offset[at + OH * OW]
                    low_y = i32(floor(py))
                    low_x = i32(floor(px))
                    fraction_y = py - T(low_y)
                    fraction_x = px - T(low_x)
                    sampled = T(0)
                    for dy in range(2):
                        yy = low_y + dy
                        weight_y = fraction_y if dy == 1 else 1.0 - fraction_y
                        for dx in range(2):
                            xx = low_x + dx
                            weight_x = fraction_x if dx == 1 else 1.0 - fraction_x
                            if 0 <= yy < H and 0 <= xx < W:
                                sampled += x[plane + yy * W + xx] * (weight_y * weight_x)
                    if MASK:
                        sampled = sampled * mask[k * OH * OW + oh * OW + ow]
                    acc += w[((m * per_group + c) * KH + kh) * KW + kw] * sampled
        y[i] = acc + bias[m]
