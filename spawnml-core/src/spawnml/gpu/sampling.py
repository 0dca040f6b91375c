"""Sampling grids on the GPU: AffineGrid, the normalized pixel coordinates (a constant of the
output size, made on the host) times each batch item's transposed ``theta`` as one batched
matrix product."""

from __future__ import annotations

import numpy as np

from ..backend import KernelContext
from ..errors import InvalidArgumentError
from .array import DeviceArray
from .table import FLOATS, GPU_KERNELS, _host, matmul, permuted


def _grid_line(size: int, align_corners: bool) -> np.ndarray:
    """The normalized coordinates of the pixels of one axis."""
    if align_corners:
        return -1 + np.arange(size) * (2 / (size - 1) if size > 1 else 0)
    return (2 * np.arange(size) + 1) / size - 1


@GPU_KERNELS.register("AffineGrid", since=20, dtypes=FLOATS)
def affine_grid(ctx: KernelContext, theta: DeviceArray, size: DeviceArray) -> DeviceArray:
    """``(N, *spatial, rank)`` sampling coordinates, innermost axis first, as GridSample reads them."""
    dims = [int(d) for d in _host(ctx, size).reshape(-1)]
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
