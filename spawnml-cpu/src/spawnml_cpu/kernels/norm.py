"""Normalization: batch (inference), instance, layer, group, LRN and mean-variance."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from spawnml.backend import KernelContext
from spawnml.dtypes import from_onnx
from spawnml.ir import Node
from spawnml.ops.shapes import normalize_axis

from .nn_common import compute_dtype, per_channel, widen
from .table import KERNELS

#: MeanVarianceNormalization's fixed guard against a zero deviation.
MVN_EPSILON = 1e-9


def _standardize(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> tuple[np.ndarray, ...]:
    """``(x - mean) / sqrt(var + epsilon)`` over ``axes``, with the mean and inverse deviation."""
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    inv_std = 1 / np.sqrt((centered * centered).mean(axis=axes, keepdims=True) + x.dtype.type(epsilon))
    return centered * inv_std, mean, inv_std


def _inference_only(node: Node, opset: int) -> str | None:
    if node.attrs.get("training_mode", 0) or (opset < 7 and not node.attrs.get("is_test", 0)):
        return "training mode is not supported"
    if any(node.outputs[1:]):
        return "running and saved statistics outputs (training) are not supported"
    return None


@KERNELS.register("BatchNormalization", check=_inference_only)
def _batch_norm(
    ctx: KernelContext, x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray
) -> np.ndarray:
    work = compute_dtype(x.dtype)

    def param(values: np.ndarray) -> np.ndarray:
        values = values.astype(work, copy=False)
        return per_channel(values, x.ndim) if values.ndim == 1 else values[None]

    inv_std = param(scale) / np.sqrt(param(var) + work.type(ctx.attrs["epsilon"]))
    y = (x.astype(work, copy=False) - param(mean)) * inv_std + param(bias)
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


@KERNELS.register("LayerNormalization")
def _layer_norm(
    ctx: KernelContext, x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    stash, work = _stash_type(ctx, x), compute_dtype(x.dtype)
    axis = normalize_axis(ctx.attrs["axis"], x.ndim)
    y, mean, inv_std = _standardize(x.astype(stash), tuple(range(axis, x.ndim)), ctx.attrs["epsilon"])
    y = y.astype(work, copy=False) * scale.astype(work, copy=False)
    if bias is not None:
        y += bias.astype(work, copy=False)
    return y.astype(x.dtype, copy=False), mean, inv_std


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
