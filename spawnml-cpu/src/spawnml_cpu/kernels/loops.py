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
tap over the whole output is one contiguous run, and the loops vectorize.
"""

from __future__ import annotations

import numba
import numpy as np

_JIT = {"nogil": True, "cache": True}
#: Output elements a depthwise convolution sums over all kernel taps at a time.
_CHUNK = 1024


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
    """A zeroed ``(channels, stride_h, stride_w, length)`` buffer for the phases, and its pitch.

    One row longer than the windows reach, so that runs read past a row's end stay inside.
    """
    pitch = _reach(out[1], kernel[1], strides[1], dilations[1])
    rows = _reach(out[0], kernel[0], strides[0], dilations[0])
    return np.zeros((channels, strides[0], strides[1], (rows + 1) * pitch), dtype=like.dtype), pitch


@numba.njit(**_JIT)
def _split_phases(plane: np.ndarray, begins: tuple[int, int], pitch: int, phases: np.ndarray) -> None:
    """Write ``plane (H, W)``, shifted by the leading pads ``begins``, into its phases.

    Only the places the plane covers are written: the padding stays as the buffer holds it.
    """
    stride_h, stride_w, size = phases.shape
    height, width = plane.shape
    for y in range(height):
        row, phase_h = divmod(y + begins[0], stride_h)
        if row * pitch >= size:
            break
        source = plane[y]
        for phase_w in range(stride_w):
            first = (phase_w - begins[1]) % stride_w  # the first input column of this phase
            start = row * pitch + (first + begins[1]) // stride_w
            count = min(-(-(width - first) // stride_w), (row + 1) * pitch - start)
            target = phases[phase_h, phase_w, start : start + max(count, 0)]
            if stride_w == 1:  # the common strides as constants, so that the copies vectorize
                target[:] = source[:count]
            elif stride_w == 2:
                for k in range(count):
                    target[k] = source[first + k * 2]
            else:
                for k in range(count):
                    target[k] = source[first + k * stride_w]


@numba.njit(inline="always")
def _clamp(value: float, low: float, high: float) -> float:
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
    wide = np.empty(rows * pitch, dtype=out.dtype)
    for n in range(batch):
        for c in range(channels):
            _split_phases(x[n, c], begins, pitch, phases)
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
def _plane3x3(
    padded: np.ndarray,
    w: np.ndarray,
    shift: float,
    low: float,
    high: float,
    stride_h: int,
    stride_w: int,
    target: np.ndarray,
) -> None:
    """One output plane of a 3x3 depthwise convolution from its zero-padded input plane."""
    w00, w01, w02 = w[0, 0], w[0, 1], w[0, 2]
    w10, w11, w12 = w[1, 0], w[1, 1], w[1, 2]
    w20, w21, w22 = w[2, 0], w[2, 1], w[2, 2]
    rows, columns = target.shape
    for oy in range(rows):
        y = oy * stride_h
        for ox in range(columns):
            k = ox * stride_w
            total = shift + w00 * padded[y, k] + w01 * padded[y, k + 1] + w02 * padded[y, k + 2]
            total += w10 * padded[y + 1, k] + w11 * padded[y + 1, k + 1] + w12 * padded[y + 1, k + 2]
            total += w20 * padded[y + 2, k] + w21 * padded[y + 2, k + 1] + w22 * padded[y + 2, k + 2]
            target[oy, ox] = _clamp(total, low, high)


@numba.njit(inline="always")
def _plane3x3_stride2(
    even: np.ndarray,
    odd: np.ndarray,
    w: np.ndarray,
    shift: float,
    low: float,
    high: float,
    target: np.ndarray,
) -> None:
    """:func:`_plane3x3` for strides of 2, from the even and odd columns of the padded plane, so
    that every tap reads a contiguous run and the loop vectorizes."""
    w00, w01, w02 = w[0, 0], w[0, 1], w[0, 2]
    w10, w11, w12 = w[1, 0], w[1, 1], w[1, 2]
    w20, w21, w22 = w[2, 0], w[2, 1], w[2, 2]
    rows, columns = target.shape
    for oy in range(rows):
        y = oy * 2
        for k in range(columns):
            total = shift + w00 * even[y, k] + w01 * odd[y, k] + w02 * even[y, k + 1]
            total += w10 * even[y + 1, k] + w11 * odd[y + 1, k] + w12 * even[y + 1, k + 1]
            total += w20 * even[y + 2, k] + w21 * odd[y + 2, k] + w22 * even[y + 2, k + 1]
            target[oy, k] = _clamp(total, low, high)


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
    """:func:`depthwise_conv2d` for 3x3 kernels without dilation: each input plane copied once into
    a zero-padded scratch plane (split into even and odd columns for strides of 2), then every
    output pixel summed over its nine taps (the weights held in registers), biased and clamped in
    one pass over the output."""
    batch, channels, height, width = x.shape
    multiplier = w.shape[0] // channels
    stride_h, stride_w = strides
    top, left = begins
    rows, columns = out.shape[2], out.shape[3]
    halved = stride_h == stride_w == 2
    padded = np.zeros(((rows - 1) * stride_h + 3, (columns - 1) * stride_w + 3), dtype=x.dtype)
    even = np.zeros((padded.shape[0], columns + 1), dtype=x.dtype)  # padded columns 0, 2, 4, ...
    odd = np.zeros_like(even)  # padded columns 1, 3, 5, ...
    covered_rows = max(0, min(height, padded.shape[0] - top))
    covered_columns = max(0, min(width, padded.shape[1] - left))
    for n in range(batch):
        for c in range(channels):
            for y in range(covered_rows):
                source = x[n, c, y]
                if halved:
                    for column in range(left, left + covered_columns):
                        if column % 2 == 0:
                            even[top + y, column // 2] = source[column - left]
                        else:
                            odd[top + y, column // 2] = source[column - left]
                else:
                    for k in range(covered_columns):
                        padded[top + y, left + k] = source[k]
            for m in range(c * multiplier, (c + 1) * multiplier):
                if halved:
                    _plane3x3_stride2(even, odd, w[m], bias[m], low, high, out[n, m])
                elif stride_h == stride_w == 1:  # unit strides as constants, so that the loop vectorizes
                    _plane3x3(padded, w[m], bias[m], low, high, 1, 1, out[n, m])
                else:
                    _plane3x3(padded, w[m], bias[m], low, high, stride_h, stride_w, out[n, m])


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
    for c in range(x.shape[0]):
        _split_phases(x[c], begins, pitch, phases[c])
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
def crop_bias_clamp(wide: np.ndarray, bias: np.ndarray, low: float, high: float, out: np.ndarray) -> None:
    """``out (M, rows, OW) = clamp(wide[:, :, :OW] + bias[m], low, high)`` from ``wide (M, rows, pitch)``."""
    channels, rows, columns = out.shape
    for m in range(channels):
        shift = bias[m]
        for oy in range(rows):
            source, target = wide[m, oy], out[m, oy]
            for k in range(columns):
                target[k] = _clamp(source[k] + shift, low, high)


@numba.njit(**_JIT)
def add_bias_clamp(y: np.ndarray, bias: np.ndarray, low: float, high: float) -> None:
    """``y (N, M, P) = clamp(y + bias[m], low, high)`` in place."""
    batch, channels = y.shape[:2]
    for n in range(batch):
        for m in range(channels):
            row, shift = y[n, m], bias[m]
            for k in range(row.shape[0]):
                row[k] = _clamp(row[k] + shift, low, high)
