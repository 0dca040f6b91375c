"""2-D float32 convolutions as implicit GEMMs on the register tile of :mod:`.tiles`.

The input of one image is split into its stride phases (:func:`.loops.phases2d`, padded, each
output row ``pitch`` wide), after which every kernel tap of every input channel reads one
contiguous run of a phase plane: row ``(c, tap)`` of the patch matrix is that run, found at an
offset into the phases, so the product ``weights (M, C * KH * KW) @ patches`` reads the patches
in place (:func:`.tiles.gathered`) instead of copying them (im2col). One table of offsets serves
every kernel size, stride, dilation and group; the weights are used as the graph holds them
(output channel by input channel by tap). The sums of a band of output rows stay in cache for
the pass that crops the pitch's extra columns, adds the bias and the residual, clamps and
activates (:func:`.loops.crop_bias_clamp`).

Every output is summed by the same code in the same order whatever the band, the span or the
thread that computes it, so results do not depend on the thread count. Large convolutions are
cut into spans of output rows taken by the backend's threads (:func:`.threads.run_spans`).
"""

from __future__ import annotations

import numpy as np

from . import loops, tiles
from .nn_common import Windows
from .threads import MIN_SPLIT_PRODUCT, part_count, run_spans

#: Sums of a band of output rows (float32 elements, 1 MiB): about one core's L2 cache, so that
#: the finishing pass reads them from there.
_BAND_SUMS = 1 << 18
#: Pixel tiles of one band of :func:`.tiles.gathered`: the input rows a band reads stay in L2.
_TILES_PER_BAND = 8


def fits(windows: Windows, outputs_per_group: int) -> bool:
    """Whether :func:`convolve` takes a 2-D convolution of these windows: a tile's rows of output
    channels per group and pixels enough for a tile."""
    return tiles.fits(outputs_per_group, 1, windows.out[0] * _pitch(windows))


def _pitch(windows: Windows) -> int:
    """The width of an output row in the phases: the input columns one phase holds."""
    kernel, stride, dilation, out = (
        windows.kernel[1],
        windows.strides[1],
        windows.dilations[1],
        windows.out[1],
    )
    return ((out - 1) * stride + (kernel - 1) * dilation) // stride + 1


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
    """``y (M, OH, OW)`` = the convolution of one float32 image ``x (C, H, W)`` with ``weights
    (G, M/G, C/G * KH * KW)`` (C-contiguous), plus ``shift`` and ``residual`` (None: nothing),
    clamped to ``(low, high)``, activated; :func:`fits` must hold.

    From ``MIN_SPLIT_PRODUCT`` multiply-adds on, the work is cut into spans of output rows (each
    at least a tile's pixels wide), or of each group's output channels (a tile's rows at least)
    where those give more parts, taken by ``threads`` threads."""
    groups, per_group, depth = weights.shape
    phases, pitch = loops.phases2d(
        x, windows.kernel, windows.strides, windows.dilations, windows.begins, windows.out
    )
    flat = phases.reshape(-1)
    offsets = _offsets(phases, pitch, windows).reshape(groups, depth)
    rows = windows.out[0]
    least = -(-tiles.WIDTH // pitch)  # output rows of a tile's pixels: no band may be narrower

    def run(lines: slice, channels: slice) -> None:
        width = channels.stop - channels.start
        step = max(_BAND_SUMS // (groups * width * pitch), least)
        wide = np.empty(groups * width * min(step, lines.stop - lines.start) * pitch, np.float32)
        for first in range(lines.start, lines.stop, step):
            count = min(step, lines.stop - first)
            if count < least:  # a last band too narrow for a tile: moved back (rows computed twice)
                count = min(lines.stop - lines.start, least)
                first = lines.stop - count
            sums = wide[: groups * width * count * pitch].reshape(groups, width, count * pitch)
            band = slice(first, first + count)
            for g in range(groups):
                tiles.gathered(
                    weights[g, channels], flat[first * pitch :], offsets[g], sums[g], _TILES_PER_BAND
                )
                outputs = slice(g * per_group + channels.start, g * per_group + channels.stop)
                loops.crop_bias_clamp(
                    sums[g].reshape(width, count, pitch),
                    shift[outputs],
                    low,
                    high,
                    None if residual is None else residual[outputs, band],
                    y[outputs, band],
                    activation,
                )

    every_row, every_channel = slice(0, rows), slice(0, per_group)
    work = y.size * depth
    by_rows = part_count(work, max(1, rows // least), threads, MIN_SPLIT_PRODUCT)
    by_channels = part_count(work, max(1, per_group // tiles.ROWS), threads, MIN_SPLIT_PRODUCT)
    if by_rows >= by_channels:
        run_spans(lambda lines: run(lines, every_channel), rows, by_rows, threads)
    else:
        run_spans(lambda channels: run(every_row, channels), per_group, by_channels, threads)
