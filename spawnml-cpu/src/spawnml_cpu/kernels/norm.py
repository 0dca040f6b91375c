"""Normalization: batch (inference, and training from opset 14), instance, layer, group, LRN
and mean-variance."""

from __future__ import annotations

import functools
import math
import typing
from collections.abc import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from spawnml.backend import KernelContext
from spawnml.dtypes import from_onnx
from spawnml.ir import Node
from spawnml.ops.schema import TensorType
from spawnml.ops.shapes import normalize_axis
from spawnml.plan_compiler import Direct, specialize

from .nn_common import compute_dtype, per_channel, widen
from .table import KERNELS

#: MeanVarianceNormalization's fixed guard against a zero deviation.
MVN_EPSILON = 1e-9
FLOAT32 = np.dtype(np.float32)


def _standardize(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> tuple[np.ndarray, ...]:
    """``(x - mean) / sqrt(var + epsilon)`` over ``axes``, with the mean and inverse deviation."""
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    inv_std = 1 / np.sqrt((centered * centered).mean(axis=axes, keepdims=True) + x.dtype.type(epsilon))
    return centered * inv_std, mean, inv_std


def _batch_norm_check(node: Node, opset: int) -> str | None:
    """Training mode (batch statistics, updated running statistics) runs from opset 14 on."""
    statistics = any(node.outputs[1:])
    if opset >= 14:
        training = node.attrs.get("training_mode", 0)
        return "running statistics outputs need training_mode=1" if statistics and not training else None
    if statistics or (opset < 7 and not node.attrs.get("is_test", 0)):
        return "training mode before opset 14 is not supported"
    return None


@KERNELS.register("BatchNormalization", check=_batch_norm_check)
def _batch_norm(
    ctx: KernelContext, x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray
) -> np.ndarray | tuple[np.ndarray, ...]:
    work, epsilon = compute_dtype(x.dtype), ctx.attrs["epsilon"]

    def param(values: np.ndarray) -> np.ndarray:
        values = values.astype(work, copy=False)
        return per_channel(values, x.ndim) if values.ndim == 1 else values[None]

    if not ctx.attrs.get("training_mode", 0):
        return _batch_normalized(x, param(scale), param(bias), param(mean), param(var), epsilon)
    axes, values = (0, *range(2, x.ndim)), x.astype(work, copy=False)
    batch_mean, batch_var = values.mean(axis=axes), values.var(axis=axes)
    y = _batch_normalized(x, param(scale), param(bias), param(batch_mean), param(batch_var), epsilon)
    momentum = ctx.attrs["momentum"]
    running_mean = mean * momentum + batch_mean * (1 - momentum)
    running_var = var * momentum + batch_var * (1 - momentum)
    return y, running_mean.astype(mean.dtype), running_var.astype(var.dtype)


def _batch_normalized(
    x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray, epsilon: float
) -> np.ndarray:
    """``(x - mean) / sqrt(var + epsilon) * scale + bias`` with broadcastable statistics, as
    onnxruntime computes it: ``x * factor + shift`` with the statistics folded per channel, the
    factor a product with the reciprocal (a quotient differs in the last bit, which a quantizer
    downstream can turn into a whole quantization step)."""
    one = var.dtype.type(1)
    factor = (one / np.sqrt(var + var.dtype.type(epsilon))) * scale
    y = x.astype(var.dtype, copy=False) * factor
    y += bias - mean * factor
    return y.astype(x.dtype, copy=False)


@KERNELS.register("InstanceNormalization")
def _instance_norm(ctx: KernelContext, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    work = widen(x)
    y, _, _ = _standardize(work, tuple(range(2, x.ndim)), ctx.attrs["epsilon"])
    y = y * per_channel(scale.astype(work.dtype), x.ndim) + per_channel(bias.astype(work.dtype), x.ndim)
    return y.astype(x.dtype, copy=False)


def _stash_type(ctx: KernelContext, x: np.ndarray) -> np.dtype:
    """The type statistics are computed in: ``stash_type`` (float32 by default) where the
    operator has it, else the compute type of ``x``."""
    code = ctx.attrs.get("stash_type", 0)
    return from_onnx(code) if code else compute_dtype(x.dtype)


@KERNELS.register("LayerNormalization", since=17)
def layer_norm(
    ctx: KernelContext, x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    stash, work = _stash_type(ctx, x), compute_dtype(x.dtype)
    axis = normalize_axis(ctx.attrs["axis"], x.ndim)
    row = x.shape[axis:]
    parameters = [a for a in (scale, bias) if a is not None]
    if x.size and stash == x.dtype == FLOAT32 and all(_row_shaped(a, row) for a in parameters):
        return _layer_norm_float32(x, axis, scale, bias, ctx.attrs["epsilon"])
    y, mean, inv_std = _standardize(x.astype(stash), tuple(range(axis, x.ndim)), ctx.attrs["epsilon"])
    y = y.astype(work, copy=False) * scale.astype(work, copy=False)
    if bias is not None:
        y += bias.astype(work, copy=False)
    return y.astype(x.dtype, copy=False), mean, inv_std


def layer_norm_direct(
    ctx: KernelContext, inputs: Sequence[TensorType | None], outputs: Sequence[TensorType | None]
) -> Direct | None:
    """For compiled plans, where only ``Y`` is read: the row loop called directly, where shape
    inference knows that ``x``, scale and bias (if any) are float32 and the parameters' rows of
    the static shape :func:`layer_norm` takes the loop for (a value's rank never changes)."""
    known = [value for value in inputs if value is not None]
    if any(value.dtype != FLOAT32 or value.shape is None for value in known):
        return None
    if _stash_type(ctx, _EMPTY) != FLOAT32:
        return None
    x_shape, *parameters = (typing.cast(tuple[int | str | None, ...], value.shape) for value in known)
    row = x_shape[normalize_axis(ctx.attrs["axis"], len(x_shape)) :]
    if not all(_static(shape) for shape in (row, *parameters)) or 0 in row:
        return None
    static_row, given = typing.cast(tuple[tuple[int, ...], list[tuple[int, ...]]], (row, parameters))
    if not all(_row_shaped(np.empty(shape, FLOAT32), static_row) for shape in given):
        return None
    loop, width, epsilon = layer_norm_rows_loop(), math.prod(static_row), np.float32(ctx.attrs["epsilon"])

    def normalized(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        beta = np.zeros(width, FLOAT32) if bias is None else bias.reshape(width)
        return loop(x.reshape(-1, width), scale.reshape(width), beta, epsilon)[0].reshape(x.shape)

    return Direct(normalized)


specialize(layer_norm, layer_norm_direct)

_EMPTY = np.empty(0, FLOAT32)


def _static(shape: tuple[int | str | None, ...]) -> bool:
    """Whether shape inference knows every dimension of ``shape``."""
    return all(isinstance(size, int) for size in shape)


def _row_shaped(parameter: np.ndarray, row: tuple[int, ...]) -> bool:
    """Whether a float32 scale or bias holds one value per element of ``row`` (leading 1s aside)."""
    trailing = parameter.shape[max(parameter.ndim - len(row), 0) :]
    return parameter.dtype == FLOAT32 and parameter.size == math.prod(row) and trailing == row


def _layer_norm_float32(
    x: np.ndarray, axis: int, scale: np.ndarray, bias: np.ndarray | None, epsilon: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LayerNormalization of float32 arrays, scale and bias as large as a row, on the row loop."""
    width = math.prod(x.shape[axis:])
    beta = np.zeros(width, FLOAT32) if bias is None else np.ascontiguousarray(bias).reshape(width)
    out, mean, inv_std = layer_norm_rows_loop()(
        np.ascontiguousarray(x).reshape(-1, width),
        np.ascontiguousarray(scale).reshape(width),
        beta,
        np.float32(epsilon),
    )
    statistics = (*x.shape[:axis], *(1,) * (x.ndim - axis))
    return out.reshape(x.shape), mean.reshape(statistics), inv_std.reshape(statistics)


@functools.cache
def layer_norm_rows_loop() -> Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``loop(rows, gamma, beta, epsilon) -> (out, mean, inv_std)``: :func:`_normalize_rows` of
    float32 rows with their outputs made in the compiled code, so that a small normalization costs
    one call of four arguments (numba's dispatch costs about a microsecond per argument)."""
    import numba

    normalize = normalize_rows_loop()

    @numba.njit(nogil=True, cache=True)
    def loop(
        rows: np.ndarray, gamma: np.ndarray, beta: np.ndarray, epsilon: np.float32
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        count, width = rows.shape
        out = np.empty((count, width), np.float32)
        mean, inv_std = np.empty(count, np.float32), np.empty(count, np.float32)
        scratch, zeros = np.empty((1, width), np.float32), np.zeros(width, np.float32)
        normalize(rows, None, gamma, beta, zeros, epsilon, True, out, scratch, mean, inv_std)
        return out, mean, inv_std

    return loop


@functools.cache
def normalize_rows_loop() -> Callable[..., None]:
    """:func:`_normalize_rows` compiled with numba (imported on first use). Its sums may be
    reassociated, so that they vectorize."""
    import numba

    return numba.njit(nogil=True, cache=True, fastmath={"reassoc", "nsz"})(_normalize_rows)


def _normalize_rows(
    x: np.ndarray,
    skip: np.ndarray | None,
    gamma: np.ndarray,
    beta: np.ndarray,
    bias: np.ndarray,
    epsilon: np.float32,
    centered: bool,
    out: np.ndarray,
    total: np.ndarray,
    mean: np.ndarray,
    inv_std: np.ndarray,
) -> None:
    """Per row of float32 ``x``: ``total = x + skip + bias`` (``skip`` where given), its mean (0
    when not ``centered``) and inverse deviation, and ``out = (total - mean) * inv_std * gamma +
    beta``, in three passes over the row. ``total`` holds every row's sum, or is one row of scratch
    that each row reuses; it must not be ``out``, or the passes do not vectorize."""
    size = x.shape[1]
    for r in range(x.shape[0]):
        sums = total[r] if total.shape[0] == x.shape[0] else total[0]
        row_sum = np.float32(0)
        for j in range(size):
            value = x[r, j]
            if skip is not None:
                value += skip[r, j]
            value += bias[j]
            sums[j] = value
            row_sum += value
        center = row_sum / np.float32(size) if centered else np.float32(0)
        squares = np.float32(0)
        for j in range(size):
            deviation = sums[j] - center
            squares += deviation * deviation
        scale = np.float32(1) / np.sqrt(squares / np.float32(size) + epsilon)
        for j in range(size):
            out[r, j] = (sums[j] - center) * scale * gamma[j] + beta[j]
        mean[r], inv_std[r] = center, scale


@KERNELS.register("GroupNormalization")
def _group_norm(ctx: KernelContext, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    groups, work = ctx.attrs["num_groups"], compute_dtype(x.dtype)
    batch, channels = x.shape[:2]
    grouped = x.astype(_stash_type(ctx, x)).reshape(batch, groups, -1)
    y, _, _ = _standardize(grouped, (2,), ctx.attrs["epsilon"])
    if ctx.opset < 21:  # scale and bias are per group before opset 21, per channel since
        scale, bias = np.repeat(scale, channels // groups), np.repeat(bias, channels // groups)
    y = y.reshape(x.shape).astype(work, copy=False) * per_channel(scale.astype(work, copy=False), x.ndim)
    return (y + per_channel(bias.astype(work, copy=False), x.ndim)).astype(x.dtype, copy=False)


@KERNELS.register("LRN")
def _lrn(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    size, attrs = ctx.attrs["size"], ctx.attrs
    work = widen(x)
    before = (size - 1) // 2
    squares = np.pad(work * work, [(0, 0), (before, size - 1 - before), *[(0, 0)] * (x.ndim - 2)])
    sums = sliding_window_view(squares, size, axis=1).sum(axis=-1)
    scale = work.dtype.type(attrs["bias"]) + work.dtype.type(attrs["alpha"] / size) * sums
    return (work / scale ** work.dtype.type(attrs["beta"])).astype(x.dtype, copy=False)


@KERNELS.register("MeanVarianceNormalization", since=9)
def _mean_variance_norm(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    work = widen(x)
    axes = tuple(normalize_axis(axis, x.ndim) for axis in ctx.attrs["axes"])
    centered = work - work.mean(axis=axes, keepdims=True)
    deviation = np.sqrt((centered * centered).mean(axis=axes, keepdims=True))
    return (centered / (deviation + work.dtype.type(MVN_EPSILON))).astype(x.dtype, copy=False)
