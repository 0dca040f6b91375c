"""Loops compiled with numba for the kernels numpy cannot run in one fast pass.

Imported on first use (numba takes a while to import); compiled once per element type and
cached next to this file. The loops run on the calling thread without the GIL, so that
:mod:`.threads` can run parts of one convolution on several threads at once; numba's
parallel loops would leave OpenMP threads spinning against the BLAS threads of the GEMMs
that follow them, which costs far more on a few cores than it gains.

The convolution loops first copy each input plane, zero-padded, into a scratch buffer split
by phase: ``phases[a, b, y, x] = padded[y * stride_h + a, x * stride_w + b]``, each phase
plane flattened with a row pitch of ``x``'s extent. Every kernel tap of every output pixel
then reads ``phases[a, b].flat[(oy + r) * pitch + ox + s]`` for fixed ``a, b, r, s``: a kernel
tap over the whole output is one contiguous run, and the loops vectorize. (Small 3x3 depthwise
ones at stride 1 read a zero-margined copy of each plane instead, see
:func:`depthwise_conv3x3_same`.)
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from .vector_math import sigmoid, tanh

_JIT: dict[str, Any] = {"nogil": True, "cache": True}
#: Output elements a depthwise convolution sums over all kernel taps at a time.
_CHUNK = 1024
#: Elements of the input phases the 3x3 depthwise loop holds at a time (16 KiB of float32: they
#: stay in L1 between the copy and the sums).
_PLANES_TILE = 1 << 12
#: The 3x3 depthwise loop sums runs of a multiple of this many outputs: it is vectorized 16
#: float32 lanes wide (AVX-512) and the rest of a run is summed one by one, 15 of a 7x7
#: plane's 63 sums at the cost of its other 48.
_VECTOR = 16


@numba.njit(inline="always")
def _reach(out: int, kernel: int, stride: int, dilation: int) -> int:
    """How far (in one phase) along one axis the windows of a convolution read."""
    return -(-((out - 1) * stride + (kernel - 1) * dilation + 1) // stride)


@numba.njit(inline="always")
def _phase_buffer(
    channels: int,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
    out: tuple[int, int],
    like: np.ndarray,
) -> tuple[np.ndarray, int]:
    """A zeroed ``(channels, stride_h, stride_w, length)`` buffer for the phases, and its pitch."""
    length, pitch = _phase_length(kernel, strides, dilations, out)
    return np.zeros((channels, strides[0], strides[1], length), dtype=like.dtype), pitch


@numba.njit(inline="always")
def _phase_length(
    kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int], out: tuple[int, int]
) -> tuple[int, int]:
    """The length of each phase plane and its pitch: one row longer than the windows reach, so
    that runs read past a row's end stay inside."""
    pitch = _reach(out[1], kernel[1], strides[1], dilations[1])
    return (_reach(out[0], kernel[0], strides[0], dilations[0]) + 1) * pitch, pitch


@numba.njit(inline="always")
def _row_starts(height: int, top: int, strides: tuple[int, int], length: int, pitch: int) -> np.ndarray:
    """Where each row of an input plane goes in its channel's flattened phases, for the rows they
    hold: row ``y`` to row ``(y + top) // stride_h`` of the phases ``((y + top) % stride_h, *)``."""
    stride_h, stride_w = strides
    starts = np.empty(max(0, min(height, (length // pitch) * stride_h - top)), dtype=np.int64)
    for y in range(starts.size):
        row, phase_h = divmod(y + top, stride_h)
        starts[y] = phase_h * stride_w * length + row * pitch
    return starts


@numba.njit(**_JIT)
def _split_phases(
    x: np.ndarray,
    first: int,
    starts: np.ndarray,
    strides: tuple[int, int],
    left: int,
    pitch: int,
    planes: np.ndarray,
) -> None:
    """Write the planes ``x[first : first + len(planes)]`` of ``x (C, H, W)`` into their phases,
    ``planes (channels, stride_h * stride_w * length)``: each row where :func:`_row_starts`
    says, shifted by the leading pad ``left``.

    Only the places the planes cover are written: the padding stays as the buffer holds it.
    Pads are never negative: the offsets are said to be with max(), so that LLVM sees that the
    indexes are not and the copies vectorize (numba wraps negative indexes around one by one).
    """
    stride_w, width = strides[1], x.shape[2]
    length = planes.shape[1] // (strides[0] * stride_w)
    left = max(left, 0)
    even, odd = (left % 2) * length + left // 2, (1 - left % 2) * length + (left + 1) // 2
    pairs = max(0, min(width // 2, pitch - (left + 1) // 2)) if stride_w == 2 else 0
    for c in range(planes.shape[0]):
        for y in range(starts.size):
            start = max(starts[y], 0)
            if stride_w == 1:
                at = max(start + left, 0)
                for k in range(min(width, pitch - left)):
                    planes[c, at + k] = x[first + c, y, k]
                continue
            at, after = max(start + even, 0), max(start + odd, 0)
            for k in range(pairs):  # columns 2k and 2k + 1 in one loop, so that it vectorizes
                planes[c, at + k] = x[first + c, y, 2 * k]
                planes[c, after + k] = x[first + c, y, 2 * k + 1]
            for column in range(2 * pairs, width):
                k, phase_w = divmod(column + left, stride_w)
                if k < pitch:
                    planes[c, start + phase_w * length + k] = x[first + c, y, column]


#: Activations the finishing passes apply after the clamp, by the code they take in an
#: ``activation = (code, alpha, beta)`` argument; NONE: only the clamp. HardSigmoid and
#: HardSwish read ``alpha * v + beta``, LeakyRelu ``alpha``.
NONE, SIGMOID, TANH, LEAKY_RELU, HARD_SIGMOID, SWISH, HARD_SWISH = range(7)
#: ``activation`` for no activation.
NO_ACTIVATION = (NONE, 0.0, 0.0)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def activate(values: np.ndarray, start: int, stop: int, activation: tuple[int, float, float]) -> None:
    """Apply ``activation`` to ``values[start:stop]`` (1-D) in place, in float32 (see
    :mod:`.vector_math`). One loop per activation, so that each vectorizes; numpy's error model,
    as Python's checks each division for zero (sigmoid divides) and the branch keeps the loops
    from vectorizing. Not inlined: inlined into the finishing loops, its loops did not vectorize."""
    values = values[start:stop]  # indexes from 0: LLVM sees that none is negative (see _split_phases)
    count = values.size
    code = activation[0]
    alpha, beta = np.float32(activation[1]), np.float32(activation[2])
    zero, one = np.float32(0), np.float32(1)
    if code == SIGMOID:
        for k in range(count):
            values[k] = sigmoid(np.float32(values[k]))
    elif code == TANH:
        for k in range(count):
            values[k] = tanh(np.float32(values[k]))
    elif code == LEAKY_RELU:
        for k in range(count):
            value = np.float32(values[k])
            values[k] = value * alpha if value < zero else value
    elif code == HARD_SIGMOID:
        for k in range(count):
            values[k] = _clamp(np.float32(values[k]) * alpha + beta, zero, one)
    elif code == SWISH:
        for k in range(count):
            value = np.float32(values[k])
            values[k] = value * sigmoid(value)
    elif code == HARD_SWISH:
        for k in range(count):
            value = np.float32(values[k])
            values[k] = value * _clamp(value * alpha + beta, zero, one)


@numba.njit(inline="always")
def _activate_strided(values: np.ndarray, scratch: np.ndarray, activation: tuple[int, float, float]) -> None:
    """:func:`activate` over ``values`` (1-D, of a view numba takes for strided), through
    ``scratch`` (as long, contiguous): on a view numba does not know to be contiguous, the loops
    would read element by element."""
    if activation[0] == NONE:
        return
    count = values.size
    for k in range(count):
        scratch[k] = values[k]
    activate(scratch, 0, count, activation)
    for k in range(count):
        values[k] = scratch[k]


@numba.njit(inline="always")
def _clamp(
    value: float | np.floating, low: float | np.floating, high: float | np.floating
) -> float | np.floating:
    """``value`` limited to ``[low, high]``; NaN stays NaN. (Written so that loops vectorize.)"""
    value = low if value < low else value
    return high if value > high else value


@numba.njit(**_JIT)
def depthwise_conv2d(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray,
    strides: tuple[int, int],
    dilations: tuple[int, int],
    begins: tuple[int, int],
    low: float,
    high: float,
    out: np.ndarray,
) -> None:
    """``out (N, M, OH, OW)`` = depthwise 2-D convolution of ``x (N, C, H, W)`` with ``w (M, KH, KW)``
    plus ``bias (M,)``, clamped to ``[low, high]``; output channel ``m`` reads input channel
    ``m // (M / C)``."""
    batch, channels = x.shape[:2]
    outputs, kernel_h, kernel_w = w.shape
    rows, columns = out.shape[2], out.shape[3]
    multiplier = outputs // channels
    buffer, pitch = _phase_buffer(1, (kernel_h, kernel_w), strides, dilations, (rows, columns), x)
    phases = buffer[0]
    starts = _row_starts(x.shape[2], max(begins[0], 0), strides, buffer.shape[3], pitch)
    wide = np.empty(rows * pitch, dtype=out.dtype)
    for n in range(batch):
        for c in range(channels):
            _split_phases(x[n], c, starts, strides, begins[1], pitch, buffer.reshape(1, -1))
            for m in range(c * multiplier, (c + 1) * multiplier):
                wide[:] = bias[m]
                for chunk in range(0, wide.size, _CHUNK):  # a chunk of the sums stays in L1
                    size = min(_CHUNK, wide.size - chunk)
                    sums = wide[chunk : chunk + size]
                    for i in range(kernel_h):
                        row, phase_h = divmod(i * dilations[0], strides[0])
                        for j in range(kernel_w):
                            column, phase_w = divmod(j * dilations[1], strides[1])
                            start = chunk + row * pitch + column
                            reads = phases[phase_h, phase_w, start : start + size]
                            weight = w[m, i, j]
                            for k in range(size):
                                sums[k] += weight * reads[k]
                for oy in range(rows):
                    sums, target = wide[oy * pitch : oy * pitch + columns], out[n, m, oy]
                    for ox in range(columns):
                        target[ox] = _clamp(sums[ox], low, high)


@numba.njit(inline="always")
def _taps3x3(w: np.ndarray, m: int) -> tuple[float, ...]:
    """The nine weights of ``w[m]`` (3x3), row by row, to hold in registers."""
    return (
        w[m, 0, 0],
        w[m, 0, 1],
        w[m, 0, 2],
        w[m, 1, 0],
        w[m, 1, 1],
        w[m, 1, 2],
        w[m, 2, 0],
        w[m, 2, 1],
        w[m, 2, 2],
    )


@numba.njit(**_JIT)
def depthwise_conv3x3(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray,
    strides: tuple[int, int],
    begins: tuple[int, int],
    low: float,
    high: float,
    out: np.ndarray,
) -> None:
    """:func:`depthwise_conv2d` for 3x3 kernels without dilation, over the phases of a few input
    planes at a time (:data:`_PLANES_TILE`): every output plane is summed as one run of
    ``rows * pitch`` sums, rounded up to whole vectors (:data:`_VECTOR`; the columns past its
    width and the sums past its last row are summed but not used) with the nine
    weights in registers, biased and clamped in the same pass, then its columns copied out.
    One run per plane vectorizes on the narrow planes too, where rows of 7 or 14 would not."""
    batch, channels = x.shape[:2]
    multiplier = w.shape[0] // channels
    rows, columns = out.shape[2], out.shape[3]
    length, pitch = _phase_length((3, 3), strides, (1, 1), (rows, columns))
    run = -(-rows * pitch // _VECTOR) * _VECTOR  # the sums of one plane, in whole vectors
    length += -(-_VECTOR // pitch) * pitch  # zero rows for the reads of the last vector
    size = strides[0] * strides[1] * length  # of one channel's phases
    tile = min(channels, max(1, _PLANES_TILE // size))
    planes = np.zeros((tile, size), dtype=x.dtype)
    starts = _row_starts(x.shape[2], max(begins[0], 0), strides, length, pitch)
    taps = np.empty(9, dtype=np.int64)  # where each tap's run starts in a channel's phases
    for i in range(3):
        row, phase_h = divmod(i, strides[0])
        for j in range(3):
            column, phase_w = divmod(j, strides[1])
            taps[3 * i + j] = (phase_h * strides[1] + phase_w) * length + row * pitch + column
    # (max(): see _split_phases)
    t0, t1, t2 = max(taps[0], 0), max(taps[1], 0), max(taps[2], 0)
    t3, t4, t5 = max(taps[3], 0), max(taps[4], 0), max(taps[5], 0)
    t6, t7, t8 = max(taps[6], 0), max(taps[7], 0), max(taps[8], 0)
    wide = np.empty(run, dtype=out.dtype)
    sums = wide[: rows * pitch].reshape(rows, pitch)
    for n in range(batch):
        for first in range(0, channels, tile):
            count = min(tile, channels - first)
            _split_phases(x[n], first, starts, strides, begins[1], pitch, planes[:count])
            for c in range(count):
                plane = planes[c]
                for m in range((first + c) * multiplier, (first + c + 1) * multiplier):
                    w0, w1, w2, w3, w4, w5, w6, w7, w8 = _taps3x3(w, m)
                    shift = bias[m]
                    for k in range(run):
                        total = shift + w0 * plane[k + t0] + w1 * plane[k + t1] + w2 * plane[k + t2]
                        total += w3 * plane[k + t3] + w4 * plane[k + t4] + w5 * plane[k + t5]
                        total += w6 * plane[k + t6] + w7 * plane[k + t7] + w8 * plane[k + t8]
                        wide[k] = _clamp(total, low, high)
                    for oy in range(rows):
                        for ox in range(columns):
                            out[n, m, oy, ox] = sums[oy, ox]


@numba.njit(**_JIT)
def depthwise_conv3x3_same(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray,
    channels: tuple[int, int],
    low: float,
    high: float,
    out: np.ndarray,
) -> None:
    """:func:`depthwise_conv3x3` at stride 1 with one pad on every side (outputs the size of the
    inputs), for the channels ``range(*channels)`` of C-contiguous ``x``, ``w (C, 3, 3)`` and
    ``out``. Each plane is summed as one flat run of ``height * width`` outputs, written straight
    to ``out`` (no pitch to crop: a 7x7 plane takes four vectors, not seven rows of seven). The
    taps read copies of the plane with a zero row and one more zero on either side, so that a
    tap above or below the plane reads zeros. A left tap of a row's first output reads the row
    above's last input: the left taps read a copy whose last column is zero (no left tap reads
    that column otherwise), the right taps one whose first column is. 960 channels at 7x7: 36
    against 61 us, 384 at 14x14: 39 against 61 (one thread, from cache)."""
    batch, height, width = x.shape[0], x.shape[2], x.shape[3]
    plane = height * width
    start = width + 1  # of the plane in each copy
    middle, lefts, rights = np.zeros((3, plane + 2 * start), dtype=x.dtype)
    planes = x.reshape(batch, x.shape[1], plane)
    sums = out.reshape(batch, out.shape[1], plane)
    # where each tap's run starts in its copy (max(): see _split_phases)
    t0, t1, t2 = max(start - width - 1, 0), max(start - width, 0), max(start - width + 1, 0)
    t3, t4, t5 = max(start - 1, 0), max(start, 0), max(start + 1, 0)
    t6, t7, t8 = max(start + width - 1, 0), max(start + width, 0), max(start + width + 1, 0)
    for n in range(batch):
        for c in range(channels[0], channels[1]):
            for k in range(plane):
                middle[t4 + k] = planes[n, c, k]
            for k in range(plane):
                lefts[t4 + k] = rights[t4 + k] = middle[t4 + k]
            for row in range(height):
                lefts[t4 + row * width + width - 1] = 0
                rights[t4 + row * width] = 0
            w0, w1, w2, w3, w4, w5, w6, w7, w8 = _taps3x3(w, c)
            shift = bias[c]
            for k in range(plane):
                total = shift + w0 * lefts[t0 + k] + w1 * middle[t1 + k] + w2 * rights[t2 + k]
                total += w3 * lefts[t3 + k] + w4 * middle[t4 + k] + w5 * rights[t5 + k]
                total += w6 * lefts[t6 + k] + w7 * middle[t7 + k] + w8 * rights[t8 + k]
                sums[n, c, k] = _clamp(total, low, high)


@numba.njit(**_JIT)
def phases2d(
    x: np.ndarray,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
    begins: tuple[int, int],
    out: tuple[int, int],
) -> tuple[np.ndarray, int]:
    """The phases of every channel of ``x (C, H, W)`` for a 2-D convolution, and their pitch."""
    phases, pitch = _phase_buffer(x.shape[0], kernel, strides, dilations, out, x)
    starts = _row_starts(x.shape[1], max(begins[0], 0), strides, phases.shape[3], pitch)
    _split_phases(x, 0, starts, strides, begins[1], pitch, phases.reshape(x.shape[0], -1))
    return phases, pitch


@numba.njit(**_JIT)
def im2col2d(
    phases: np.ndarray, pitch: int, dilations: tuple[int, int], first: int, cols: np.ndarray
) -> None:
    """The patches of output rows ``first`` on into ``cols (C, KH, KW, rows * pitch)``, from
    :func:`phases2d`, each output row ``pitch`` wide: every kernel tap is one contiguous run of
    its phase (the columns past the output's width are read but not used)."""
    channels, strides = phases.shape[0], phases.shape[1:3]
    kernel_h, kernel_w, length = cols.shape[1:]
    for c in range(channels):
        for i in range(kernel_h):
            row, phase_h = divmod(i * dilations[0], strides[0])
            for j in range(kernel_w):
                column, phase_w = divmod(j * dilations[1], strides[1])
                start = (first + row) * pitch + column
                source, target = phases[c, phase_h, phase_w, start : start + length], cols[c, i, j]
                for k in range(length):
                    target[k] = source[k]


@numba.njit(**_JIT)
def sum_taps(
    products: np.ndarray,
    top: int,
    first: int,
    kernel: tuple[int, int],
    dilations: tuple[int, int],
    begins: tuple[int, int],
    bias: np.ndarray,
    low: float,
    high: float,
    residual: np.ndarray | None,
    out: np.ndarray,
    activation: tuple[int, float, float],
) -> None:
    """Output rows ``first`` on of a stride-1 2-D convolution, ``out (M, rows, OW)``, from
    ``products (KH * KW, M, R, W)``: each kernel tap's weights times input rows ``top`` to
    ``top + R`` (summed over the input channels). Every output pixel sums, over the taps, the
    tap's products at the input pixel its window reads there (none in the padding), plus
    ``bias[m]`` and ``residual`` (``out``'s shape, or None to add nothing), clamped, then
    ``activation`` (see :func:`activate`) while the row is in cache."""
    height, width = products.shape[2], products.shape[3]
    channels, rows, columns = out.shape
    scratch = np.empty(columns if activation[0] != NONE else 0, dtype=out.dtype)
    for m in range(channels):
        for oy in range(rows):
            target = out[m, oy]
            shift = bias[m]
            if residual is None:
                for k in range(columns):
                    target[k] = shift
            else:
                extra = residual[m, oy]
                for k in range(columns):
                    target[k] = shift + extra[k]
            for i in range(kernel[0]):
                row = first + oy + i * dilations[0] - begins[0] - top
                if row < 0 or row >= height:
                    continue  # a padding row
                for j in range(kernel[1]):
                    offset = j * dilations[1] - begins[1]  # output column k reads input column k + offset
                    start, stop = max(0, -offset), min(columns, width - offset)
                    source = products[i * kernel[1] + j, m, row]
                    at = max(start + offset, 0)  # (max(): see _split_phases)
                    for k in range(stop - start):
                        target[start + k] += source[at + k]
            for k in range(columns):
                target[k] = _clamp(target[k], low, high)
            _activate_strided(target, scratch, activation)


@numba.njit(**_JIT)
def crop_bias_clamp(
    wide: np.ndarray,
    bias: np.ndarray,
    low: float,
    high: float,
    residual: np.ndarray | None,
    out: np.ndarray,
    activation: tuple[int, float, float],
) -> None:
    """``out (M, rows, OW) = clamp(wide[:, :, :OW] + bias[m] + residual, low, high)`` from
    ``wide (M, rows, pitch)``, then ``activation`` (see :func:`activate`); ``residual`` is
    ``out``'s shape, or None to add nothing. With an activation, each channel's rows are
    finished in ``wide`` (C-contiguous), activated there in one run, pitch and all, then copied:
    one call on a contiguous run where rows of ``out`` (a view numba takes for strided) would
    take one call and two copies each."""
    channels, rows, columns = out.shape
    activated = activation[0] != NONE
    for m in range(channels):
        shift = bias[m]
        for oy in range(rows):
            source = wide[m, oy]
            target = source if activated else out[m, oy]
            if residual is None:
                for k in range(columns):
                    target[k] = _clamp(source[k] + shift, low, high)
            else:
                extra = residual[m, oy]
                for k in range(columns):
                    target[k] = _clamp(source[k] + shift + extra[k], low, high)
        if activated:
            plane = wide[m]
            activate(plane.reshape(plane.size), 0, plane.size, activation)
            for oy in range(rows):
                source, target = plane[oy], out[m, oy]
                for k in range(columns):
                    target[k] = source[k]


@numba.njit(**_JIT)
def add_bias_clamp(
    y: np.ndarray,
    bias: np.ndarray,
    low: float,
    high: float,
    residual: np.ndarray | None,
    activation: tuple[int, float, float],
) -> None:
    """``y (N, M, P) = clamp(y + bias[m] + residual, low, high)`` in place, then ``activation``
    (see :func:`activate`) row by row while the row is in cache; ``residual`` is ``y``'s shape,
    or None to add nothing."""
    batch, channels = y.shape[:2]
    for n in range(batch):
        for m in range(channels):
            row, shift = y[n, m], bias[m]
            if residual is None:
                for k in range(row.shape[0]):
                    row[k] = _clamp(row[k] + shift, low, high)
            else:
                extra = residual[n, m]
                for k in range(row.shape[0]):
                    row[k] = _clamp(row[k] + shift + extra[k], low, high)
            activate(row, 0, row.shape[0], activation)
