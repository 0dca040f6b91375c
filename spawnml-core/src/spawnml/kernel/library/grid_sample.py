"""GridSample in two passes: each sampling point's taps per spatial axis, then the weighted sum.

:func:`grid_taps` runs one thread per point and axis. It turns the normalized grid coordinate
into a pixel coordinate, folds it inside the image (``PADDING`` border or reflection), and writes
``TAPS`` (1 nearest, 2 linear, 4 cubic) input indices with their weights; a tap outside the image
weighs 0 under zero padding, and reflection folds the tap itself. :func:`gather_taps` runs one
thread per output element and sums the input at every combination of its point's taps, weighted
by the product of their weights. Spatial axes are listed innermost first, as the grid lists its
coordinates; a 2-D image is a volume of depth 1 whose depth axis has one tap of weight 1.
Launch ``n`` threads over a 2-D grid of ``width`` threads per grid row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, f32, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, floor, global_id

#: ``MODE`` values and their taps per axis.
NEAREST, LINEAR, CUBIC = 0, 1, 2
TAPS = {NEAREST: 1, LINEAR: 2, CUBIC: 4}
#: ``PADDING`` values.
ZEROS, BORDER, REFLECTION = 0, 1, 2
#: The cubic convolution coefficient PyTorch and ONNX use.
CUBIC_A = -0.75


@kernel(workgroup=(64,))
def grid_taps(
    grid: ReadBuffer[T],
    sizes: ReadBuffer[u32],
    index: Buffer[i32],
    weight: Buffer[T],
    n: u32,
    width: u32,
    R: u32,
    T: Const[Scalar],
    MODE: Const[int],
    PADDING: Const[int],
    ALIGN: Const[bool],
    TAPS_PER_AXIS: Const[int],
):
    """Thread ``i`` is point ``i // R``, axis ``i % R`` (of ``sizes[axis]`` pixels); it writes
    ``index`` and ``weight`` at ``i * TAPS_PER_AXIS`` onwards (``TAPS[MODE]`` of them)."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        size = f32(sizes[i % R])
        low = f32(0) if ALIGN else f32(-0.5)
        high = size - f32(1) if ALIGN else size - f32(0.5)
        g = f32(grid[i])
        coord = (g + f32(1)) / f32(2) * (size - f32(1)) if ALIGN else ((g + f32(1)) * size - f32(1)) / f32(2)
        if MODE == NEAREST:  # round half to even, as rint does
            r = floor(coord + f32(0.5))
            if r - coord == f32(0.5) and r - f32(2) * floor(r * f32(0.5)) != f32(0):
                r = r - f32(1)
            coord = r
        if PADDING == BORDER and (coord < low or coord > high):
            coord = min(max(coord, f32(0)), size - f32(1))
        span = high - low
        if PADDING == REFLECTION and (coord < low or coord > high):
            distance = low - coord if coord < low else coord - high
            flips = floor(distance / span) if span > f32(0) else f32(0)
            rest = distance - flips * span
            even = flips - f32(2) * floor(flips * f32(0.5)) == f32(0)
            if coord < low:
                coord = low + rest if even else high - rest
            else:
                coord = high - rest if even else low + rest
            if span <= f32(0):
                coord = low
        base = floor(coord)
        t = coord - base
        for k in range(TAPS_PER_AXIS):
            tap = base + f32(k)
            w = f32(1)
            if MODE == NEAREST:
                tap = coord
            if MODE == LINEAR:
                w = t if k == 1 else f32(1) - t
            if MODE == CUBIC:
                tap = base + f32(k - 1)
                d = abs(t - f32(k - 1))
                near = ((f32(CUBIC_A) + f32(2)) * d - (f32(CUBIC_A) + f32(3))) * d * d + f32(1)
                far = ((f32(CUBIC_A) * d - f32(5) * f32(CUBIC_A)) * d + f32(8) * f32(CUBIC_A)) * d - f32(
                    4
                ) * f32(CUBIC_A)
                w = near if d <= f32(1) else far
            if PADDING == REFLECTION and (tap < low or tap > high):
                distance = low - tap if tap < low else tap - high
                flips = floor(distance / span) if span > f32(0) else f32(0)
                rest = distance - flips * span
                even = flips - f32(2) * floor(flips * f32(0.5)) == f32(0)
                if tap < low:
                    tap = low + rest if even else high - rest
                else:
                    tap = high - rest if even else low + rest
                if span <= f32(0):
                    tap = low
            at = i32(tap)  # truncation toward zero, after reflection
            if PADDING == ZEROS and (at < 0 or at >= i32(size)):
                w = f32(0)
            index[i * u32(TAPS_PER_AXIS) + u32(k)] = min(max(at, 0), i32(size) - 1)
            weight[i * u32(TAPS_PER_AXIS) + u32(k)] = T(w)


@kernel(workgroup=(64,))
def gather_taps(
    x: ReadBuffer[T],
    index: ReadBuffer[i32],
    weight: ReadBuffer[T],
    out: Buffer[T],
    n: u32,
    width: u32,
    C: u32,
    D: u32,
    H: u32,
    W: u32,
    points: u32,
    T: Const[Scalar],
    TAPS_PER_AXIS: Const[int],
    VOLUME: Const[bool],
):
    """``out[b, c, p] = sum over taps of x[b, c, z, y, x] * wz * wy * wx`` for ``points`` per item."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        p = i % points
        c = (i // points) % C
        b = i // (points * C)
        axes = u32(3) if VOLUME else u32(2)
        first = (b * points + p) * axes * u32(TAPS_PER_AXIS)
        image = (b * C + c) * D * H * W
        total = T(0)
        for tz in range(TAPS_PER_AXIS if VOLUME else 1):
            z = u32(0)
            wz = T(1)
            if VOLUME:
                z = u32(index[first + u32(2 * TAPS_PER_AXIS + tz)])
                wz = weight[first + u32(2 * TAPS_PER_AXIS + tz)]
            for ty in range(TAPS_PER_AXIS):
                y = u32(index[first + u32(TAPS_PER_AXIS + ty)])
                wy = weight[first + u32(TAPS_PER_AXIS + ty)]
                for tx in range(TAPS_PER_AXIS):
                    value = x[image + (z * H + y) * W + u32(index[first + u32(tx)])]
                    total += value * (wz * wy * weight[first + u32(tx)])
        out[i] = total
