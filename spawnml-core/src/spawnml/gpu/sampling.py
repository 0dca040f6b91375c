"""Sampling grids on the GPU. AffineGrid is the normalized pixel coordinates (a constant of the
output size, made on the host) times each batch item's transposed ``theta`` as one batched
matrix product; GridSample is two kernels, the taps of each point and then their weighted sum."""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.library.grid_sample import (
    BORDER,
    CUBIC,
    LINEAR,
    NEAREST,
    REFLECTION,
    TAPS,
    ZEROS,
    gather_taps,
    grid_taps,
)
from ..ops.shapes import as_text
from .array import DeviceArray
from .host import to_host
from .table import FLOATS, GPU_KERNELS, GPUContext, matmul, permuted


def _grid_line(size: int, align_corners: bool) -> np.ndarray:
    """The normalized coordinates of the pixels of one axis."""
    if align_corners:
        return -1 + np.arange(size) * (2 / (size - 1) if size > 1 else 0)
    return (2 * np.arange(size) + 1) / size - 1


@GPU_KERNELS.register("AffineGrid", since=20, dtypes=FLOATS)
def affine_grid(ctx: GPUContext, theta: DeviceArray, size: DeviceArray) -> DeviceArray:
    """``(N, *spatial, rank)`` sampling coordinates, innermost axis first, as GridSample reads them."""
    dims = [int(d) for d in to_host(ctx, size).reshape(-1)]
    rank = len(dims) - 2
    if rank not in (2, 3) or theta.shape != (dims[0], rank, rank + 1):
        raise InvalidArgumentError(
            f"theta of shape {list(theta.shape)} does not fit an output of size {dims}"
        )
    lines = [_grid_line(n, bool(ctx.attrs.get("align_corners", 0))) for n in dims[2:]]
    mesh = np.meshgrid(*lines, indexing="ij")
    points = np.stack([*reversed(mesh), np.ones_like(mesh[0])], axis=-1).reshape(1, -1, rank + 1)
    base = ctx.backend.from_numpy(points.astype(np.float32))
    grid = matmul(ctx, base, permuted(ctx, theta, [0, 2, 1]))
    return grid.view((dims[0], *dims[2:], rank))


#: GridSample's interpolation modes by their opset-16 and opset-20 names.
_MODES = {"bilinear": LINEAR, "bicubic": CUBIC, "nearest": NEAREST}
_MODES_20 = {"linear": LINEAR, "cubic": CUBIC, "nearest": NEAREST}
_PADDINGS = {"zeros": ZEROS, "border": BORDER, "reflection": REFLECTION}


def _modes(opset: int) -> dict[str, int]:
    return _MODES if opset < 20 else _MODES_20


def _check_grid_sample(node: Node, opset: int) -> str | None:
    mode = as_text(node.attrs.get("mode", "bilinear" if opset < 20 else "linear"))
    if mode not in _modes(opset):
        return f"mode {mode!r} is not one of {sorted(_modes(opset))} at opset {opset}"
    padding = as_text(node.attrs.get("padding_mode", "zeros"))
    return None if padding in _PADDINGS else f"padding_mode {padding!r} is not one of {sorted(_PADDINGS)}"


@GPU_KERNELS.register("GridSample", since=16, check=_check_grid_sample, dtypes=FLOATS)
def grid_sample(ctx: GPUContext, x: DeviceArray, grid: DeviceArray) -> DeviceArray:
    """``x`` (N, C, *spatial) sampled at ``grid`` (N, *out, rank): the taps of every point and
    axis, then their weighted sum per channel."""
    spatial = x.shape[2:]
    rank = len(spatial)
    if (
        rank not in (2, 3)
        or grid.shape[0] != x.shape[0]
        or grid.shape[-1] != rank
        or len(grid.shape) != len(x.shape)
    ):
        raise InvalidArgumentError(
            f"a grid of shape {list(grid.shape)} does not sample an input of shape {list(x.shape)}"
        )
    mode = _modes(ctx.opset)[as_text(ctx.attrs.get("mode", "bilinear" if ctx.opset < 20 else "linear"))]
    taps = TAPS[mode]
    out_spatial = grid.shape[1:-1]
    out = ctx.backend.empty((*x.shape[:2], *out_spatial), x.dtype)
    if not out.size:
        return out
    index = ctx.backend.empty((grid.size * taps,), np.dtype(np.int32))
    weight = ctx.backend.empty((grid.size * taps,), x.dtype)
    sizes = ctx.backend.constant(list(reversed(spatial)))  # innermost axis first, as the grid lists them
    padding = _PADDINGS[as_text(ctx.attrs.get("padding_mode", "zeros"))]
    align = bool(ctx.attrs.get("align_corners", 0))
    k = grid_taps.specialize(T=x.elem, MODE=mode, PADDING=padding, ALIGN=align, TAPS_PER_AXIS=taps)
    ctx.backend.launch_flat(k, [grid, sizes, index, weight], grid.size, R=rank)
    depth, height, width = (1, *spatial) if rank == 2 else spatial
    k = gather_taps.specialize(T=x.elem, TAPS_PER_AXIS=taps, VOLUME=rank == 3)
    scalars = {"C": x.shape[1], "D": depth, "H": height, "W": width, "points": math.prod(out_spatial)}
    ctx.backend.launch_flat(k, [x, index, weight, out], out.size, **scalars)
    return out
