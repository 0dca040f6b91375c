"""2-D float32 convolutions as implicit GEMMs on the register tile of :mod:`.tiles`.

The input is split into its stride phases (:func:`.loops.phases2d`, padded, each output row
``pitch`` wide; the images of a batch one after another), after which every kernel tap of every
input channel reads one contiguous run of a phase plane: row ``(c, tap)`` of the patch matrix is
that run, found at an offset into the phases, so the product ``weights (M, C * KH * KW) @
patches`` reads the patches in place (:func:`.tiles.gathered`) instead of copying them (im2col).
One table of offsets serves every kernel size, stride, dilation and group, and the images of a
batch go through the products together, so that small ones fill the tiles; the weights are used
as the graph holds them (output channel by input channel by tap). The sums of a band of output
rows stay in cache for the pass that drops the pitch's extra columns, adds the bias and the
residual, clamps and activates (:func:`_finish`).

Every output is summed by the same code in the same order whatever the band, the span or the
thread that computes it, so results do not depend on the thread count. Large convolutions are
cut into spans of output rows, or of output channels, taken by the backend's threads
(:func:`.threads.run_spans`).
"""

from __future__ import annotations

import numba
import numpy as np

from . import loops, tiles
from .nn_common import Windows
from .threads import MIN_SPLIT_PRODUCT, part_count, run_spans

#: Sums of a band of output rows (float32 elements, 1 MiB): about one core's L2 cache, so that
#: the finishing pass reads them from there.
_BAND_SUMS = 1 << 18
#: Pixel tiles of one band of :func:`.tiles.gathered`: the input rows a band reads stay in L2.
_TILES_PER_BAND = 8


def fits(windows: Windows, outputs_per_group: int, batch: int, groups: int) -> bool:
    """Whether :func:`convolve` takes a 2-D convolution of these windows over ``batch`` images:
    pixels enough for a tile, and a tile's rows of output channels per group, or fewer in one
    group (their weights then padded with rows of zeros: one product where each group's would cost
    more in calls than it saves)."""
    rows = outputs_per_group if groups > 1 else max(outputs_per_group, tiles.ROWS)
    return tiles.fits(rows, 1, _rows(windows, batch) * _reach(windows, 1))


def _reach(windows: Windows, axis: int) -> int:
    """How far along ``axis`` (0: rows, 1: columns) one phase of the input reaches: the width of an
    output row in the phases (their pitch) for the columns."""
    kernel, stride, dilation, out = (
        windows.kernel[axis],
        windows.strides[axis],
        windows.dilations[axis],
        windows.out[axis],
    )
    return ((out - 1) * stride + (kernel - 1) * dilation) // stride + 1


def _rows(windows: Windows, batch: int) -> int:
    """The output rows of ``batch`` images laid one after another in the phases, each image's
    phases (and so its rows) :func:`_reach` plus one rows apart: those between one image's last
    output row and the next image's first are computed and dropped."""
    return (batch - 1) * (_reach(windows, 0) + 1) + windows.out[0]


def _phases(windows: Windows, x: np.ndarray) -> tuple[np.ndarray, int]:
    """The stride phases (:func:`.loops.phases2d`) of every image of ``x (N, C, H, W)``, as one
    ``(C, SH, SW, N * length)`` array (each image's after the previous one's), and their pitch."""
    batch, channels = x.shape[:2]
    settings = windows.kernel, windows.strides, windows.dilations, windows.begins, windows.out
    every, pitch = loops.phases2d(x.reshape(batch * channels, *x.shape[2:]), *settings)
    if batch == 1:
        return every, pitch
    shape = every.shape
    images = every.reshape(batch, channels, *shape[1:]).transpose(1, 2, 3, 0, 4)
    return np.ascontiguousarray(images).reshape(channels, *shape[1:3], batch * shape[3]), pitch


def _offsets(phases: np.ndarray, pitch: int, windows: Windows) -> np.ndarray:
    """Where the run of each input channel and kernel tap starts in the flat ``phases (C, SH, SW,
    length)``, for output row 0, in the weights' order (channel, then tap)."""
    channels, stride_h, stride_w, length = phases.shape
    rows_h, phase_h = np.divmod(np.arange(windows.kernel[0]) * windows.dilations[0], stride_h)
    columns, phase_w = np.divmod(np.arange(windows.kernel[1]) * windows.dilations[1], stride_w)
    taps = (
        (phase_h[:, None] * stride_w + phase_w[None, :]) * length + rows_h[:, None] * pitch + columns[None, :]
    )
    per_channel = np.arange(channels, dtype=np.int64) * (stride_h * stride_w * length)
    return (per_channel[:, None] + taps.reshape(1, -1)).reshape(-1)


def convolve(
    windows: Windows,
    x: np.ndarray,
    weights: np.ndarray,
    shift: np.ndarray,
    low: np.floating,
    high: np.floating,
    residual: np.ndarray | None,
    y: np.ndarray,
    threads: int,
    activation: tuple[int, float, float],
) -> None:
    """``y (N, M, OH, OW)`` = the convolution of the float32 images ``x (N, C, H, W)`` with
    ``weights (G, M/G, C/G * KH * KW)`` (C-contiguous), plus ``shift`` and ``residual`` (None:
    nothing), clamped to ``(low, high)``, activated; :func:`fits` must hold. The images' rows go
    through the products together, so that small images fill the tiles (see :func:`_rows`).

    From ``MIN_SPLIT_PRODUCT`` multiply-adds on, the work is cut into spans of those rows (each
    at least a tile's pixels wide), or of each group's output channels (a tile's rows at least)
    where those give more parts, taken by ``threads`` threads."""
    groups, per_group, depth = weights.shape
    if per_group < tiles.ROWS:  # one group of few outputs: the tile's other rows are zeros
        weights = np.concatenate([weights, np.zeros((1, tiles.ROWS - per_group, depth), weights.dtype)], 1)
    phases, pitch = _phases(windows, x)
    flat = phases.reshape(-1)
    offsets = _offsets(phases, pitch, windows).reshape(groups, depth)
    rows, apart = _rows(windows, len(x)), _reach(windows, 0) + 1
    finishing = shift, low, high, residual, y, activation
    least = -(-tiles.WIDTH // pitch)  # rows of a tile's pixels: no band may be narrower

    def run(lines: slice, channels: slice) -> None:
        width = channels.stop - channels.start
        height = max(width, tiles.ROWS)  # the tile's rows: those of the zero weights too
        step = max(_BAND_SUMS // (groups * height * pitch), least)
        wide = np.empty(groups * height * min(step, lines.stop - lines.start) * pitch, np.float32)
        for first in range(lines.start, lines.stop, step):
            count = min(step, lines.stop - first)
            if count < least:  # a last band too narrow for a tile: moved back (rows computed twice)
                count = min(lines.stop - lines.start, least)
                first = lines.stop - count
            sums = wide[: groups * height * count * pitch].reshape(groups, height, count * pitch)
            for g in range(groups):
                weights_g = weights[g, channels.start : channels.start + height]
                tiles.gathered(weights_g, flat[first * pitch :], offsets[g], sums[g], _TILES_PER_BAND)
                outputs = g * per_group + channels.start
                _finish(sums[g, :width].reshape(width, count, pitch), first, apart, outputs, *finishing)

    every_row, every_channel = slice(0, rows), slice(0, per_group)
    work = y.size * depth
    by_rows = part_count(work, max(1, rows // least), threads, MIN_SPLIT_PRODUCT)
    by_channels = part_count(work, max(1, per_group // tiles.ROWS), threads, MIN_SPLIT_PRODUCT)
    if by_rows >= by_channels:
        run_spans(lambda lines: run(lines, every_channel), rows, by_rows, threads)
    else:
        run_spans(lambda channels: run(every_row, channels), per_group, by_channels, threads)


@numba.njit(nogil=True, cache=True)
def _finish(
    sums: np.ndarray,
    first: int,
    apart: int,
    channel: int,
    shift: np.ndarray,
    low: float | np.floating,
    high: float | np.floating,
    residual: np.ndarray | None,
    y: np.ndarray,
    activation: tuple[int, float, float],
) -> None:
    """Output channels ``channel`` on of ``y (N, M, OH, OW)`` from ``sums (channels, rows, pitch)``
    (C-contiguous) of the rows ``first`` on (image ``row // apart``, its output row ``row %
    apart``; the rows past an image's last output row are dropped): plus ``shift[m]`` and
    ``residual`` (``y``'s shape; None: nothing), clamped to ``(low, high)`` (NaN stays NaN), then
    ``activation`` (:func:`.loops.activate`). With an activation, each channel's sums are
    finished in place and activated in one run, pitch and dropped rows and all, then copied: short
    rows would each take a call."""
    channels, rows, _ = sums.shape
    out_rows, columns = y.shape[2], y.shape[3]
    activated = activation[0] != loops.NONE
    for m in range(channels):
        add = shift[channel + m]
        for r in range(rows):
            n, oy = divmod(first + r, apart)
            if oy >= out_rows:
                continue
            source = sums[m, r]
            target = source if activated else y[n, channel + m, oy]
            for k in range(columns):
                value = source[k] + add
                if residual is not None:
                    value += residual[n, channel + m, oy, k]
                value = low if value < low else value
                target[k] = high if value > high else value
        if activated:
            plane = sums[m].reshape(-1)
            loops.activate(plane, 0, plane.size, activation)
            for r in range(rows):
                n, oy = divmod(first + r, apart)
                if oy < out_rows:
                    y[n, channel + m, oy, :] = sums[m, r, :columns]
