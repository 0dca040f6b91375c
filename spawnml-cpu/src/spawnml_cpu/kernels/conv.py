"""Convolutions.

2-D float convolutions (and 1-D ones, as 2-D over a height of one) run on the compiled loops
of :mod:`.loops`: depthwise ones directly (3x3 ones on loops of their own, a flat one for small
planes at stride 1), 1x1 ones as one GEMM per group on the input itself (float32 ones of one
group on the register-tiled loop of :mod:`.tiles`, cut into spans of output channels over the
threads when large), the other float32 ones of a tile's rows of outputs per group as implicit
GEMMs on that loop, reading the patches in place (:mod:`.conv_implicit`), except those whose
windows cover their output (weight gradients), which the products by tap take; of the others,
stride-1 ones of few outputs (up to ``_BY_TAP_OUTPUTS``) as one GEMM of every kernel tap's
weights by the input and a sum of its products at each window's places, the others as im2col +
GEMM over tiles of output rows whose patches stay in cache. 1-D ones whose patches fit in 1 MiB
(audio frames, a recurrent model's encoder) copy them with one strided numpy copy instead, as
their cost is all in the calls.
1x1 ones on BLAS and those by kernel tap are matrix products and use BLAS's threads as MatMul's do
(from ``BLAS_THREADS_WORK`` multiply-adds an image on); im2col's GEMMs run on one BLAS thread, and large
ones are cut over the backend's threads instead (spans of output rows, of channels when
depthwise; see :mod:`.threads`).
Bias, a residual to add (FusedConv's Z), a clamping activation (FusedConv's Relu and Clip) and
then another activation (Sigmoid, Tanh, LeakyRelu, HardSigmoid, SiLU, HardSwish: float32, see
:func:`.loops.activate`) are applied in the same pass that finishes the output, row by row while
each is in cache (after the depthwise loops, which clamp as they sum, in a pass of its own where
there is a residual or another activation; by the tiled 1x1 loop after each tile). Other ranks
and types take the N-d numpy path: im2col through a sliding-window view, or one multiply-add
per kernel tap when depthwise.
"""

from __future__ import annotations

import functools
import math
from types import ModuleType

import numpy as np
from numpy.lib.stride_tricks import as_strided
from spawnml.backend import KernelContext
from spawnml.errors import InvalidArgumentError

from .nn_common import Windows, compute_dtype, grouped_matmul, per_channel, widen
from .table import KERNELS
from .threads import (
    BLAS_THREADS_WORK,
    MIN_SPLIT_DEPTHWISE,
    MIN_SPLIT_PRODUCT,
    blas_for,
    one_blas_thread,
    part_count,
    run_spans,
    thread_count,
)

#: Elements of the patch matrix of a 1-D convolution copied at once (1 MiB of float32: it stays in cache).
_TILE = 1 << 18
#: Elements of the patch matrix im2col fills at a time for 2-D convolutions (2 MiB of float32:
#: smaller tiles ran slower on the 3x3 convolutions measured).
_ROWS_TILE = 1 << 19
#: The most output channels for which stride-1 convolutions take the path of products by kernel tap
#: (:func:`_products_by_tap`) rather than im2col + GEMM, whose GEMM of so few rows packs each patch
#: for few multiply-adds; from about 48 outputs im2col was as fast or faster.
_BY_TAP_OUTPUTS = 32
#: The largest planes of 3x3 depthwise convolutions at stride 1 with one pad on every side that
#: take the flat loop (:func:`.loops.depthwise_conv3x3_same`); larger ones take the phases, which
#: hold a few planes in L1 at a time (the flat loop was faster up to 28x28, the phases at 56x56).
_FLAT_PLANE = 1024
#: Elements of the products by tap computed at a time (4 MiB of float32).
_BY_TAP_TILE = 1 << 20
#: Element types the compiled loops take.
_COMPILED = frozenset({np.dtype(np.float32), np.dtype(np.float64)})

#: A clamp's bound: a Python float from the node's attributes, or one in the input's type.
Bound = float | np.floating
#: An activation the finishing passes apply: ``(code, alpha, beta)``, see :func:`.loops.activate`.
Activation = tuple[int, float, float]


def convolve(
    attrs: dict,
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None = None,
    clamp: tuple[float, float] | None = None,
    residual: np.ndarray | None = None,
    activation: Activation | None = None,
) -> np.ndarray:
    """Grouped N-d cross-correlation of ``x (N, C, *S)`` with ``w (M, C/group, *K)``, plus ``bias (M,)``,
    plus ``residual`` (of the output's shape), limited to ``clamp = (low, high)`` if given (Relu, Clip;
    bounds of ``x``'s type), then ``activation`` if given (float32 only: computed in float32).

    The result is C-contiguous.
    """
    group = attrs.get("group", 1)
    kernel = tuple(attrs.get("kernel_shape") or w.shape[2:])
    windows = Windows.of(attrs, x.shape[2:], kernel)
    if residual is not None:
        residual = _residual(residual, (x.shape[0], w.shape[0], *windows.out), x.dtype)
    compiled = x.dtype in _COMPILED and w.dtype == x.dtype
    if len(kernel) in (1, 2) and compiled:
        act = _loops().NO_ACTIVATION if activation is None else activation
        if len(kernel) == 1 and _small_1d(windows, x, w, group):
            return _convolve_1d(windows, x, w, group, bias, clamp, residual, act)
        lifted = len(kernel) == 1
        y = _convolve_2d(
            _lift(windows) if lifted else windows,
            np.ascontiguousarray(x[:, :, None] if lifted else x),
            w[:, :, None] if lifted else w,
            group,
            bias,
            clamp,
            residual[:, :, None] if residual is not None and lifted else residual,
            act,
        )
        return y[:, :, 0] if lifted else y
    y = np.ascontiguousarray(_convolve_nd(windows, x, w, group))
    if bias is not None:
        y += per_channel(bias.astype(y.dtype, copy=False), y.ndim)
    if residual is not None:
        y += residual
    if clamp is not None:
        np.clip(y, *clamp, out=y)
    if activation is not None:
        _loops().activate(y.reshape(-1), 0, y.size, activation)
    return y


@functools.cache
def _loops() -> ModuleType:
    """The compiled loops, imported on first use (numba takes a while to import)."""
    from . import loops

    return loops


@functools.cache
def _tiles() -> ModuleType:
    """The register-tiled products, imported on first use (they import numba and llvmlite)."""
    from . import tiles

    return tiles


@functools.cache
def _implicit() -> ModuleType:
    """The implicit GEMMs on the register tile, imported on first use (they import numba)."""
    from . import conv_implicit

    return conv_implicit


@functools.cache
def _unbounded(dtype: np.dtype) -> tuple[np.floating, np.floating]:
    """The clamp of no bounds, in ``dtype``."""
    return dtype.type(-np.inf), dtype.type(np.inf)


def _residual(residual: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """``residual`` as a C-contiguous array of ``dtype``; it must have the output's ``shape``."""
    if residual.shape != shape:
        raise InvalidArgumentError(
            f"the residual to add (FusedConv's Z) has shape {list(residual.shape)}, "
            f"not the convolution's output shape {list(shape)}"
        )
    return np.ascontiguousarray(residual, dtype=dtype)


def _small_1d(windows: Windows, x: np.ndarray, w: np.ndarray, group: int) -> bool:
    """Whether a 1-D convolution is dense and its patch matrix fits in one tile."""
    depthwise = group == x.shape[1] > 1 and w.shape[1] == 1
    return not depthwise and x.shape[1] * windows.kernel[0] * windows.out[0] <= _TILE


def _convolve_1d(
    windows: Windows,
    x: np.ndarray,
    w: np.ndarray,
    group: int,
    bias: np.ndarray | None,
    clamp: tuple[float, float] | None,
    residual: np.ndarray | None,
    activation: Activation,
) -> np.ndarray:
    """A 1-D convolution as one strided copy of its patches (im2col) and one GEMM per group."""
    loops = _loops()

    batch, channels, length = x.shape
    (kernel,), (stride,), (dilation,), (begin,), (out,) = (
        windows.kernel,
        windows.strides,
        windows.dilations,
        windows.begins,
        windows.out,
    )
    outputs = w.shape[0]
    y = np.empty((batch, outputs, out), dtype=x.dtype)
    if y.size == 0:
        return y
    reach = (out - 1) * stride + (kernel - 1) * dilation + 1  # padded input the windows read
    padded = np.zeros((batch, channels, reach), dtype=x.dtype)
    covered = max(0, min(length, reach - begin))
    padded[:, :, begin : begin + covered] = x[:, :, :covered]
    item = padded.itemsize
    patches = as_strided(
        padded,
        (batch, channels, kernel, out),
        (padded.strides[0], padded.strides[1], dilation * item, stride * item),
        writeable=False,
    ).reshape(batch, group, -1, out)
    weights = w.reshape(group, outputs // group, -1)
    with blas_for(y[0].size * weights.shape[2]):
        for n in range(batch):
            grouped_matmul(weights, patches[n], y[n].reshape(group, outputs // group, out))
    if bias is not None or clamp is not None or residual is not None or activation[0] != loops.NONE:
        shift = np.zeros(outputs, x.dtype) if bias is None else bias.astype(x.dtype, copy=False)
        low, high = clamp or _unbounded(x.dtype)
        loops.add_bias_clamp(y, shift, low, high, residual, activation)
    return y


def _lift(windows: Windows) -> Windows:
    """The windows of a 1-D convolution as those of a 2-D one over a height of one."""
    return Windows(
        (1, *windows.kernel),
        (1, *windows.strides),
        (1, *windows.dilations),
        (0, *windows.begins),
        (0, *windows.ends),
        (1, *windows.out),
    )


def _convolve_2d(
    windows: Windows,
    x: np.ndarray,
    w: np.ndarray,
    group: int,
    bias: np.ndarray | None,
    clamp: tuple[float, float] | None,
    residual: np.ndarray | None,
    activation: Activation,
) -> np.ndarray:
    """A 2-D convolution of C-contiguous ``x`` on the compiled loops and BLAS (see the module's
    docstring for the threads each path uses)."""
    loops = _loops()

    batch, channels = x.shape[:2]
    outputs = w.shape[0]
    y = np.empty((batch, outputs, *windows.out), dtype=x.dtype)
    if y.size == 0:
        return y
    shift = np.zeros(outputs, x.dtype) if bias is None else bias.astype(x.dtype, copy=False)
    low, high = clamp or _unbounded(x.dtype)
    pixels = math.prod(windows.out)
    threads = thread_count()  # how the work below is split and which path it takes
    if group == channels > 1 and w.shape[1] == 1:  # depthwise (one input channel: a GEMM is faster)
        weights = np.ascontiguousarray(w.reshape(outputs, *windows.kernel))
        if residual is None and activation[0] == loops.NONE:
            _depthwise_2d(windows, x, weights, shift, low, high, y, threads)
            return y
        unbounded = x.dtype.type(np.inf)
        _depthwise_2d(windows, x, weights, shift, -unbounded, unbounded, y, threads)
        shift, rows = np.zeros(outputs, x.dtype), (batch, outputs, pixels)
        extra = None if residual is None else residual.reshape(rows)
        loops.add_bias_clamp(y.reshape(rows), shift, low, high, extra, activation)
        return y
    weights = w.reshape(group, outputs // group, -1)
    finish = bias is not None or clamp is not None or residual is not None or activation[0] != loops.NONE
    if _is_pointwise(windows, x.shape[2:]):
        extra = None if residual is None else residual.reshape(batch, outputs, pixels)
        x, out = x.reshape(batch, group, -1, pixels), y.reshape(batch, outputs, pixels)
        if _tiled(weights, out):
            _pointwise_tiled(weights[0], x[:, 0], shift, low, high, extra, out, threads, activation)
        else:
            _pointwise(weights, x, shift if finish else None, low, high, extra, out, activation)
        return y
    by_tap = group == 1 and outputs <= _BY_TAP_OUTPUTS and windows.strides == (1, 1)
    implicit = x.dtype == np.float32 and not (by_tap and _covers_output(windows))
    if implicit and _implicit().fits(windows, outputs // group, batch, group):
        weights = np.ascontiguousarray(weights)
        _implicit().convolve(windows, x, weights, shift, low, high, residual, y, threads, activation)
        return y
    if by_tap:
        taps = math.prod(windows.kernel)  # every tap's weights, (KH * KW * M, C): a copy, once a call
        by_tap = np.moveaxis(w.reshape(outputs, channels, taps), 2, 0).reshape(-1, channels)
        with blas_for(y[0].size * weights.shape[2]):
            for n in range(batch):
                extra = None if residual is None else residual[n]
                _products_by_tap(windows, x[n], by_tap, shift, low, high, extra, y[n], activation)
        return y
    with one_blas_thread():  # tiles' GEMMs on BLAS's threads: no gain measured (MobileNetV2, det)
        for n in range(batch):
            extra = None if residual is None else residual[n]
            _im2col_gemm(windows, x[n], weights, shift, low, high, extra, y[n], threads, activation)
    return y


def _covers_output(windows: Windows) -> bool:
    """Whether a 2-D convolution's windows have at least as many taps as its output has pixels, as
    the convolution that gives a weight gradient has (the images by the output gradient as the
    kernel): the implicit GEMM would compute several times more columns than it keeps, where the
    products by tap compute each tap's once (0.64 -> 0.45 ms of CPU for the digits CNN's second
    layer, 8 images of 128 channels by a 16x128x4x4 kernel)."""
    return math.prod(windows.kernel) >= math.prod(windows.out)


def _depthwise_2d(
    windows: Windows,
    x: np.ndarray,
    weights: np.ndarray,
    shift: np.ndarray,
    low: Bound,
    high: Bound,
    y: np.ndarray,
    threads: int,
) -> None:
    """The depthwise loop (3x3 kernels without dilation have their own); large ones are cut into
    spans of channels taken by ``threads`` threads (see :data:`MIN_SPLIT_DEPTHWISE`)."""
    loops = _loops()

    same = windows.kernel == (3, 3) and windows.strides == windows.dilations == windows.begins == (1, 1)
    flat = same and windows.out == x.shape[2:] and x.shape[1] == y.shape[1] and y[0, 0].size <= _FLAT_PLANE

    def run(channels: slice) -> None:
        if flat:
            loops.depthwise_conv3x3_same(x, weights, shift, (channels.start, channels.stop), low, high, y)
            return
        operands = x[:, channels], weights[channels], shift[channels]
        if windows.kernel == (3, 3) and windows.dilations == (1, 1):
            loops.depthwise_conv3x3(*operands, windows.strides, windows.begins, low, high, y[:, channels])
        else:
            loops.depthwise_conv2d(
                *operands, windows.strides, windows.dilations, windows.begins, low, high, y[:, channels]
            )

    work = y.size * math.prod(windows.kernel)
    channels = y.shape[1]
    run_spans(run, channels, part_count(work, channels, threads, MIN_SPLIT_DEPTHWISE), threads)


def _tiled(weights: np.ndarray, y: np.ndarray) -> bool:
    """Whether the 1x1 convolution of ``weights (G, M/G, C/G)`` into ``y (N, M, P)`` takes the
    register-tiled loop (:func:`.tiles.pointwise`): float32 of one group, shapes it takes. The loop
    computes every output channel with the same code, so equal weights give equal outputs
    whatever the thread count, where BLAS's kernels may round the last rows of a block (or of a
    thread's share) differently."""
    groups, outputs, depth = weights.shape
    return groups == 1 and y.dtype == np.float32 and _tiles().fits(outputs, depth, y.shape[2])


def _pointwise_tiled(
    weights: np.ndarray,
    x: np.ndarray,
    shift: np.ndarray,
    low: Bound,
    high: Bound,
    residual: np.ndarray | None,
    y: np.ndarray,
    threads: int,
    activation: Activation,
) -> None:
    """``y (N, M, P)`` = ``weights (M, C)`` times each image of ``x (N, C, P)`` plus ``shift`` and
    ``residual`` (C-contiguous, see :func:`_residual`; None: nothing), clamped, activated, on the tiled loop;
    from ``BLAS_THREADS_WORK`` multiply-adds an image on, cut into spans of output channels (of a
    tile's rows at least) that ``threads`` threads take."""
    tiles = _tiles()
    rows, shift = np.ascontiguousarray(weights), np.ascontiguousarray(shift)
    outputs = len(rows)
    parts = part_count(y[0].size * rows.shape[1], outputs // tiles.ROWS, threads, BLAS_THREADS_WORK)
    for n in range(len(y)):

        def run(channels: slice, n: int = n) -> None:
            more = None if residual is None else residual[n, channels]
            tiles.pointwise(
                rows[channels], x[n], shift[channels], low, high, more, y[n, channels], activation
            )

        run_spans(run, outputs, parts, threads)


def _pointwise(
    weights: np.ndarray,
    x: np.ndarray,
    shift: np.ndarray | None,
    low: Bound,
    high: Bound,
    residual: np.ndarray | None,
    y: np.ndarray,
    activation: Activation,
) -> None:
    """``y (N, M, P)`` = ``weights (G, M/G, C/G)`` times each image of ``x (N, G, C/G, P)``, plus
    ``shift`` and ``residual`` (None: nothing), clamped, activated; with no finishing pass where ``shift`` is
    None. One matrix product per image and group, on BLAS's threads from ``BLAS_THREADS_WORK``
    multiply-adds an image on, as MatMul's (:func:`.threads.blas_for`)."""
    loops = _loops()

    groups, pixels = weights.shape[0], y.shape[2]
    with blas_for(y[0].size * x.shape[2]):
        for n in range(len(y)):
            grouped_matmul(weights, x[n], y[n].reshape(groups, -1, pixels))
            if shift is not None:
                extra = None if residual is None else residual[n : n + 1]
                loops.add_bias_clamp(y[n : n + 1], shift, low, high, extra, activation)


def _im2col_gemm(
    windows: Windows,
    x: np.ndarray,
    weights: np.ndarray,
    shift: np.ndarray,
    low: Bound,
    high: Bound,
    residual: np.ndarray | None,
    y: np.ndarray,
    threads: int,
    activation: Activation,
) -> None:
    """``y (M, OH, OW)`` = the convolution of one image ``x (C, H, W)`` with ``weights (G, M/G, K)``,
    plus ``shift`` and ``residual`` (None: nothing), clamped, as im2col + GEMM over tiles of output
    rows whose patches stay in cache. Large ones are cut into spans of output rows, each tiled so,
    taken by ``threads`` threads.

    The tiles hold output rows as wide as the phases' pitch, so that im2col copies one run per
    kernel tap and channel; the pass that adds the bias and clamps drops the extra columns."""
    loops = _loops()

    phases, pitch = loops.phases2d(
        x, windows.kernel, windows.strides, windows.dilations, windows.begins, windows.out
    )
    rows = windows.out[0]
    depth = x.shape[0] * math.prod(windows.kernel)
    parts = part_count(y.size * weights.shape[2], rows, threads, MIN_SPLIT_PRODUCT)
    step = min(-(-rows // parts), max(1, _ROWS_TILE // (depth * pitch)))

    def run(span: slice) -> None:
        cols = np.empty(depth * step * pitch, dtype=x.dtype)
        wide = np.empty(y.shape[0] * step * pitch, dtype=x.dtype)
        for first in range(span.start, span.stop, step):
            count = min(step, span.stop - first)
            patches = cols[: depth * count * pitch].reshape(x.shape[0], *windows.kernel, count * pitch)
            loops.im2col2d(phases, pitch, windows.dilations, first, patches)
            sums = wide[: y.shape[0] * count * pitch].reshape(*weights.shape[:2], count * pitch)
            grouped_matmul(weights, patches.reshape(weights.shape[0], -1, count * pitch), sums)
            tile = slice(first, first + count)
            loops.crop_bias_clamp(
                sums.reshape(y.shape[0], count, pitch),
                shift,
                low,
                high,
                None if residual is None else residual[:, tile],
                y[:, tile],
                activation,
            )

    run_spans(run, rows, parts, threads)


def _products_by_tap(
    windows: Windows,
    x: np.ndarray,
    weights: np.ndarray,
    shift: np.ndarray,
    low: Bound,
    high: Bound,
    residual: np.ndarray | None,
    y: np.ndarray,
    activation: Activation,
) -> None:
    """``y (M, OH, OW)`` = the stride-1 convolution of one image ``x (C, H, W)`` with every kernel
    tap's weights, ``weights (KH * KW * M, C)``, plus ``shift`` and ``residual`` (None: nothing),
    clamped: one GEMM of those weights by the input rows a band of output rows reads, then the
    products summed at each window's places (:func:`.loops.sum_taps`). The input is read as it
    is, with no patches copied, and the GEMM has KH * KW times im2col's rows; it runs on the BLAS
    threads the caller has set (the sums on the calling thread)."""
    loops = _loops()

    channels, height, width = x.shape
    outputs, taps = y.shape[0], math.prod(windows.kernel)
    pixels = x.reshape(channels, height * width)
    reach = (windows.kernel[0] - 1) * windows.dilations[0]  # input rows a window spans, less one
    rows = windows.out[0]
    band = min(rows, max(1, _BY_TAP_TILE // (taps * outputs * width) - reach))
    products = np.empty(taps * outputs * (band + reach) * width, x.dtype)
    for first in range(0, rows, band):
        count = min(band, rows - first)
        top = max(first - windows.begins[0], 0)
        bottom = max(top, min(first + count - windows.begins[0] + reach, height))
        block = products[: weights.shape[0] * (bottom - top) * width].reshape(weights.shape[0], -1)
        np.matmul(weights, pixels[:, top * width : bottom * width], out=block)
        tile = slice(first, first + count)
        loops.sum_taps(
            block.reshape(taps, outputs, bottom - top, width),
            top,
            first,
            windows.kernel,
            windows.dilations,
            windows.begins,
            shift,
            low,
            high,
            None if residual is None else residual[:, tile],
            y[:, tile],
            activation,
        )


def _is_pointwise(windows: Windows, sizes: tuple[int, ...]) -> bool:
    """Whether every output pixel reads exactly the input pixel at its place (1x1, stride 1, no pads)."""
    return windows.kernel == (1, 1) and windows.strides == (1, 1) and windows.out == tuple(sizes)


def _convolve_nd(windows: Windows, x: np.ndarray, w: np.ndarray, group: int) -> np.ndarray:
    """Grouped N-d convolution in numpy, for the ranks and types the compiled loops do not take."""
    if group > 1 and w.shape[1] == 1:
        return _depthwise(windows, x, w, group)
    batch, channels = x.shape[:2]
    spatial = len(windows.kernel)
    cols = windows.view(x).reshape(batch, group, channels // group, *windows.out, *windows.kernel)
    # (N, G, C/G, *out, *K) -> (G, C/G, *K, N, *out): the im2col matrix of each group.
    order = (1, 2, *range(3 + spatial, 3 + 2 * spatial), 0, *range(3, 3 + spatial))
    cols = cols.transpose(order).reshape(group, -1, batch * math.prod(windows.out))
    with blas_for(w.size * cols.shape[2]):
        y = grouped_matmul(w.reshape(group, w.shape[0] // group, -1), cols)
    return np.moveaxis(y.reshape(w.shape[0], batch, *windows.out), 1, 0)


def _depthwise(windows: Windows, x: np.ndarray, w: np.ndarray, group: int) -> np.ndarray:
    """Convolution where every group reads one input channel: a multiply-add per tap."""
    batch, multiplier = x.shape[0], w.shape[0] // group
    spread = (1,) * len(windows.out)
    weights = w.reshape(group, multiplier, -1)
    y = np.zeros((batch, group, multiplier, *windows.out), dtype=np.result_type(x, w))
    for index, values in enumerate(windows.each_tap(x)):
        y += values[:, :, None] * weights[:, :, index].reshape(group, multiplier, *spread)
    return y.reshape(batch, group * multiplier, *windows.out)


@KERNELS.register("Conv")
def _conv(ctx: KernelContext, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    dtype = compute_dtype(x.dtype)
    bias = None if b is None else b.astype(dtype, copy=False)
    return convolve(ctx.attrs, widen(x), w.astype(dtype, copy=False), bias).astype(x.dtype, copy=False)
