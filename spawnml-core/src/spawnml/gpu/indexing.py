"""Indexing, shape-producing and row operators on the GPU: GatherElements, GatherND, Compress, OneHot,
Tile, Trilu, Split, ScatterND, ScatterElements, MaxUnpool, CumSum, CumProd, LogSoftmax, Hardmax, CastLike,
Range, ConstantOfShape, EyeLike and Size.

Range and ConstantOfShape take their sizes and values from shape-like inputs read on the host
(free for initializers; OneHot its depth) and upload the result, as EyeLike and Size do from the
input's shape;
Compress reads its condition on the host (it decides the output's shape) and gathers on the
device; everything else runs as a kernel.
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import from_onnx
from ..errors import InvalidArgumentError, SpawnMLError
from ..ir import Node
from ..kernel.library.chain import step
from ..kernel.library.indexing import gather_elements, gather_nd, scatter_elements, scatter_nd, tile, trilu
from ..kernel.library.scan import cumulative_rows, hardmax_rows, log_softmax_rows
from ..ops.defs.vision import unpool_attrs, unpooled_size
from .array import DeviceArray
from .fused import run_chain
from .host import to_host
from .shapes import axis_index, contiguous_strides
from .table import ALL_FLOATS, GPU_KERNELS, GPUContext, cast_to, copy_strided, take


@GPU_KERNELS.register("GatherElements", since=11)
def gather_elements_(ctx: GPUContext, data: DeviceArray, indices: DeviceArray) -> DeviceArray:
    rank = len(data.shape)
    axis = axis_index(int(ctx.attrs.get("axis", 0)), rank)
    out = ctx.backend.empty(indices.shape, data.dtype)
    if out.size:
        meta = ctx.backend.constant([*indices.shape, *contiguous_strides(data.shape)])
        k = gather_elements.specialize(T=data.elem, RANK=rank)
        scalars = {"axis": axis, "axis_dim": data.shape[axis]}
        ctx.backend.launch_flat(k, [data, indices, out, meta], out.size, **scalars)
    return out


@GPU_KERNELS.register("Tile", since=6)
def tile_(ctx: GPUContext, x: DeviceArray, repeats: DeviceArray) -> DeviceArray:
    counts = [int(r) for r in to_host(ctx, repeats)]
    if len(counts) != len(x.shape) or min(counts, default=0) < 0:
        raise InvalidArgumentError(f"Tile repeats {counts} do not fit a tensor of shape {list(x.shape)}")
    shape = [d * r for d, r in zip(x.shape, counts, strict=True)]
    out = ctx.backend.empty(shape, x.dtype)
    if out.size:
        meta = ctx.backend.constant([*shape, *x.shape, *contiguous_strides(x.shape)])
        ctx.backend.launch_flat(tile.specialize(T=x.elem, RANK=len(shape)), [x, out, meta], out.size)
    return out


@GPU_KERNELS.register("Trilu", since=14)
def trilu_(ctx: GPUContext, x: DeviceArray, k: DeviceArray | None = None) -> DeviceArray:
    diagonal = 0 if k is None else int(to_host(ctx, k).reshape(()))
    out = ctx.backend.empty(x.shape, x.dtype)
    if out.size:
        kernel = trilu.specialize(T=x.elem, UPPER=bool(ctx.attrs.get("upper", 1)))
        rows, cols = x.shape[-2:]
        bounded = max(min(diagonal, cols), -rows)  # the same triangle, within int32
        ctx.backend.launch_flat(kernel, [x, out], out.size, rows=rows, cols=cols, diagonal=bounded)
    return out


@GPU_KERNELS.register("Split", since=1)
def split(ctx: GPUContext, x: DeviceArray, sizes: DeviceArray | None = None) -> tuple[DeviceArray, ...]:
    axis = axis_index(int(ctx.attrs.get("axis", 0)), len(x.shape))
    count, size = len(ctx.node.outputs), x.shape[axis]
    listed = ctx.attrs.get("split")
    if listed is None and sizes is not None:
        listed = [int(s) for s in to_host(ctx, sizes)]
    if listed is None:
        chunk = -(-size // count)
        listed = [chunk] * (count - 1) + [size - chunk * (count - 1)]
    if len(listed) != count or sum(listed) != size or min(listed) < 0:
        raise InvalidArgumentError(f"cannot split an axis of size {size} into {list(listed)}")
    parts, start, strides = [], 0, contiguous_strides(x.shape)
    for length in listed:
        shape = [*x.shape[:axis], int(length), *x.shape[axis + 1 :]]
        out = ctx.backend.empty(shape, x.dtype)
        if out.size:
            copy_strided(ctx, x, out, shape, strides, contiguous_strides(shape), start * strides[axis])
        parts.append(out)
        start += int(length)
    return tuple(parts)


def _rows(ctx: GPUContext, x: DeviceArray, opset_coerces_2d: bool) -> tuple[int, int]:
    """``(D, inner)`` of the row operators: the axis alone from opset 13, all axes from it before."""
    axis = axis_index(int(ctx.attrs.get("axis", 1 if opset_coerces_2d else -1)), len(x.shape))
    if opset_coerces_2d:
        return math.prod(x.shape[axis:]), 1
    return x.shape[axis], math.prod(x.shape[axis + 1 :])


def _row_op(ctx: GPUContext, x: DeviceArray, kernel) -> DeviceArray:
    size, inner = _rows(ctx, x, ctx.opset < 13)
    out = ctx.backend.empty(x.shape, x.dtype)
    if out.size:
        ctx.backend.launch_flat(kernel, [x, out], x.size // size, D=size, inner=inner)
    return out


@GPU_KERNELS.register("LogSoftmax", since=1, dtypes=ALL_FLOATS)
def log_softmax(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    return _row_op(ctx, x, log_softmax_rows.specialize(T=x.elem))


@GPU_KERNELS.register("Hardmax", since=1, dtypes=ALL_FLOATS)
def hardmax(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    return _row_op(ctx, x, hardmax_rows.specialize(T=x.elem))


def cumulative(ctx: GPUContext, x: DeviceArray, axis: DeviceArray, product: bool) -> DeviceArray:
    """CumSum or CumProd along the axis ``axis`` holds."""
    dim = axis_index(int(to_host(ctx, axis).reshape(())), len(x.shape))
    out = ctx.backend.empty(x.shape, x.dtype)
    if out.size:
        flags = {
            "EXCLUSIVE": bool(ctx.attrs.get("exclusive", 0)),
            "REVERSE": bool(ctx.attrs.get("reverse", 0)),
        }
        k = cumulative_rows.specialize(T=x.elem, PRODUCT=product, **flags)
        size, inner = x.shape[dim], math.prod(x.shape[dim + 1 :])
        ctx.backend.launch_flat(k, [x, out], x.size // size, D=size, inner=inner)
    return out


GPU_KERNELS.register("CumSum", since=11)(lambda ctx, x, axis: cumulative(ctx, x, axis, product=False))
GPU_KERNELS.register("CumProd", since=26)(lambda ctx, x, axis: cumulative(ctx, x, axis, product=True))


@GPU_KERNELS.register("CastLike", since=15)
def cast_like(ctx: GPUContext, x: DeviceArray, like: DeviceArray) -> DeviceArray:
    return cast_to(ctx, x, like.dtype)


@GPU_KERNELS.register("Range", since=11)
def range_(ctx: GPUContext, start: DeviceArray, limit: DeviceArray, delta: DeviceArray) -> DeviceArray:
    first, last, step = (to_host(ctx, v).reshape(()) for v in (start, limit, delta))
    if step == 0:
        raise InvalidArgumentError("Range delta cannot be 0")
    count = max(math.ceil((float(last) - float(first)) / float(step)), 0)
    values = first + np.arange(count, dtype=first.dtype) * step
    return ctx.backend.from_numpy(values.astype(first.dtype))


@GPU_KERNELS.register("ConstantOfShape", since=9)
def constant_of_shape(ctx: GPUContext, shape: DeviceArray) -> DeviceArray:
    value = ctx.attrs.get("value")
    fill = np.zeros((), np.float32) if value is None else np.asarray(value).reshape(-1)[0]
    return ctx.backend.from_numpy(
        np.full([int(d) for d in to_host(ctx, shape)], fill, np.asarray(fill).dtype)
    )


@GPU_KERNELS.register("EyeLike", since=9)
def eye_like(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    """Ones on the ``k``-th diagonal of a matrix shaped like ``x``, of type ``dtype`` (else ``x``'s)."""
    code = ctx.attrs.get("dtype")
    rows, columns = x.shape
    dtype = x.dtype if code is None else from_onnx(int(code))
    return ctx.backend.from_numpy(np.eye(rows, columns, k=int(ctx.attrs.get("k", 0)), dtype=dtype))


@GPU_KERNELS.register("Size", since=1)
def size(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    return ctx.backend.from_numpy(np.array(x.size, np.int64))


@GPU_KERNELS.register("Compress", since=9)
def compress(ctx: GPUContext, data: DeviceArray, condition: DeviceArray) -> DeviceArray:
    """The slices of ``data`` along ``axis`` (of its flattened elements without one) where ``condition``."""
    axis = ctx.attrs.get("axis")
    source = data.view((data.size,)) if axis is None else data
    axis = 0 if axis is None else axis_index(int(axis), len(data.shape))
    keep = to_host(ctx, condition).reshape(-1).astype(bool)
    if keep.size > source.shape[axis]:
        raise InvalidArgumentError(
            f"Compress condition of length {keep.size} is longer than axis {axis} ({source.shape[axis]})"
        )
    return take(ctx, source, ctx.backend.from_numpy(np.flatnonzero(keep).astype(np.int32)), axis)


@GPU_KERNELS.register("OneHot", since=9)
def one_hot(ctx: GPUContext, indices: DeviceArray, depth: DeviceArray, values: DeviceArray) -> DeviceArray:
    """``values[1]`` where an index (negative from the end) equals the position along the new
    ``axis``, else ``values[0]``: one generated elementwise launch over the broadcast operands."""
    rank = len(indices.shape) + 1
    axis = axis_index(int(ctx.attrs.get("axis", -1)), rank)
    size = int(to_host(ctx, depth).reshape(-1)[0])
    if size < 1 or values.size != 2:
        raise InvalidArgumentError(
            f"OneHot needs a positive depth and two values, got {size} and {values.size}"
        )
    off, on = (ctx.backend.empty((), values.dtype) for _ in range(2))
    for offset, target in enumerate((off, on)):
        copy_strided(ctx, values, target, [1], [1], [1], src_offset=offset)
    positions = np.arange(size, dtype=np.int32).reshape(size, *[1] * (rank - axis - 1))
    inputs = [
        indices.view((*indices.shape[:axis], 1, *indices.shape[axis:])),
        ctx.backend.from_numpy(positions),
        ctx.backend.from_numpy(np.array(size, np.int32)),
        ctx.backend.from_numpy(np.array(0, np.int32)),
        off,
        on,
    ]
    steps = (
        step("Cast", [0], "int32"),  # 6: the index, truncated
        step("Add", [6, 2], "int32"),  # 7: counted from the end
        step("Less", [6, 3], "bool"),
        step("Where", [8, 7, 6], "int32"),
        step("Equal", [9, 1], "bool"),
        step("Where", [10, 5, 4], values.dtype.name),
    )
    return run_chain(ctx, steps, inputs, "one_hot")


@GPU_KERNELS.register("GatherND", since=11)
def gather_nd_(ctx: GPUContext, data: DeviceArray, indices: DeviceArray) -> DeviceArray:
    batch, depth = int(ctx.attrs.get("batch_dims", 0)), indices.shape[-1]
    if indices.shape[:batch] != data.shape[:batch] or not 1 <= depth <= len(data.shape) - batch:
        raise InvalidArgumentError(
            f"GatherND indices of shape {list(indices.shape)} do not index data of shape {list(data.shape)}"
        )
    shape = [*indices.shape[:-1], *data.shape[batch + depth :]]
    out = ctx.backend.empty(shape, data.dtype)
    if out.size:
        strides = contiguous_strides(data.shape)
        meta = ctx.backend.constant([*data.shape[batch : batch + depth], *strides[batch : batch + depth]])
        scalars = {
            "inner": math.prod(data.shape[batch + depth :]),
            "per_batch": max(math.prod(indices.shape[batch:-1]), 1),
            "batch_stride": math.prod(data.shape[batch:]),
        }
        k = gather_nd.specialize(T=data.elem, K=depth)
        ctx.backend.launch_flat(k, [data, indices, out, meta], out.size, **scalars)
    return out


_REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}


def _reduction(ctx: GPUContext) -> int:
    name = ctx.attrs.get("reduction", "none")
    if name not in _REDUCTIONS:
        raise InvalidArgumentError(f"{ctx.node.op_type} has no reduction {name!r}")
    return _REDUCTIONS[name]


def _copy(ctx: GPUContext, data: DeviceArray) -> DeviceArray:
    out = ctx.backend.empty(data.shape, data.dtype)
    if out.size:
        copy_strided(ctx, data, out, [out.size], [1], [1])
    return out


@GPU_KERNELS.register("ScatterND", since=11)
def scatter_nd_(
    ctx: GPUContext, data: DeviceArray, indices: DeviceArray, updates: DeviceArray
) -> DeviceArray:
    depth = indices.shape[-1]
    out = _copy(ctx, data)
    inner = math.prod(data.shape[depth:])
    if updates.size and inner:
        strides = contiguous_strides(data.shape)
        meta = ctx.backend.constant([*data.shape[:depth], *strides[:depth]])
        k = scatter_nd.specialize(T=data.elem, K=depth, REDUCTION=_reduction(ctx))
        count = math.prod(indices.shape[:-1])
        ctx.backend.launch_flat(k, [out, indices, updates, meta], inner, count=count)
    return out


@GPU_KERNELS.register("Scatter", since=9, until=11)
@GPU_KERNELS.register("ScatterElements", since=11)
def scatter_elements_(
    ctx: GPUContext, data: DeviceArray, indices: DeviceArray, updates: DeviceArray
) -> DeviceArray:
    rank = len(data.shape)
    axis = axis_index(int(ctx.attrs.get("axis", 0)), rank)
    out = _copy(ctx, data)
    if updates.size:
        meta = ctx.backend.constant([*updates.shape, *contiguous_strides(data.shape)])
        k = scatter_elements.specialize(T=data.elem, RANK=rank, REDUCTION=_reduction(ctx))
        length = updates.shape[axis]
        scalars = {
            "inner": math.prod(updates.shape[axis + 1 :]),
            "length": length,
            "axis": axis,
            "axis_dim": data.shape[axis],
        }
        ctx.backend.launch_flat(k, [out, indices, updates, meta], updates.size // length, **scalars)
    return out


def _check_unpool(node: Node, opset: int) -> str | None:
    try:
        unpool_attrs(node.attrs)
    except SpawnMLError as error:
        return str(error)
    return None


@GPU_KERNELS.register("MaxUnpool", since=9, check=_check_unpool)
def max_unpool(
    ctx: GPUContext, x: DeviceArray, indices: DeviceArray, output_shape: DeviceArray | None = None
) -> DeviceArray:
    """The pooled values scattered to their flat ``indices`` in the unpooled shape (zeros elsewhere),
    padded at the end of each axis up to ``output_shape`` when given, as ONNX's reference does."""
    kernel, strides, pads = unpool_attrs(ctx.attrs)
    count = len(kernel)
    if len(x.shape) != count + 2 or indices.shape != x.shape:
        raise InvalidArgumentError(
            f"input {list(x.shape)} and indices {list(indices.shape)} do not fit a {count}-d kernel"
        )
    spatial = [
        unpooled_size(x.shape[2 + i], kernel[i], strides[i], (pads[i], pads[i + count])) for i in range(count)
    ]
    unpooled = (*x.shape[:2], *spatial)
    zeros = ctx.backend.from_numpy(np.zeros(math.prod(unpooled), x.dtype))
    flat = scatter_elements_(ctx, zeros, indices.view((indices.size,)), x.view((x.size,))).view(unpooled)
    if output_shape is None:
        return flat
    target = [int(d) for d in to_host(ctx, output_shape).reshape(-1)]
    if len(target) != len(unpooled) or any(t < u for t, u in zip(target, unpooled, strict=True)):
        raise InvalidArgumentError(
            f"output_shape {target} is smaller than the unpooled shape {list(unpooled)}"
        )
    # Copied on the device, so that no host copy of the zeros goes stale once the values land.
    out = _copy(ctx, ctx.backend.from_numpy(np.zeros(target, x.dtype)))
    copy_strided(ctx, flat, out, unpooled, contiguous_strides(unpooled), contiguous_strides(target))
    return out
