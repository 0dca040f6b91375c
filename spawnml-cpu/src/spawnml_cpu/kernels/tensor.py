"""CPU kernels of the tensor and shape-movement operators (reshaping, indexing, padding, ...).

Reshape-like kernels return numpy views of their input where numpy gives one.
"""

from __future__ import annotations

import math

import numpy as np
from spawnml.backend import CheckFn, KernelContext
from spawnml.dtypes import HALF_FLOAT_NAMES, from_onnx
from spawnml.ops.defs.tensor import constant_value, einsum_terms, range_length
from spawnml.ops.shapes import as_text

from .checks import one_of, scalar, valid_when
from .elementwise import widen
from .table import KERNELS
from .threads import blas_for

INT64 = np.dtype(np.int64)

# ---------------------------------------------------------------------------- helpers


def _ints(array: np.ndarray) -> list[int]:
    return [int(item) for item in np.asarray(array).reshape(-1).tolist()]


def _listed(ctx: KernelContext, attr: str, array: np.ndarray | None, since: int) -> list[int] | None:
    """Ints given as attribute ``attr`` before opset ``since``, as an input array from it."""
    if ctx.opset < since:
        value = ctx.attrs.get(attr)
        return None if value is None else [int(item) for item in value]
    return None if array is None else _ints(array)


def _required(ctx: KernelContext, attr: str, array: np.ndarray | None, since: int) -> list[int]:
    """As :func:`_listed`, for ints the operator cannot go without."""
    listed = _listed(ctx, attr, array, since)
    if listed is None:
        raise ValueError(f"{ctx.node.op_type} is missing its {attr}")
    return listed


def _fixed_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise IndexError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _compact(array: np.ndarray) -> np.ndarray:
    """The array itself when C-contiguous, else a C-contiguous copy."""
    return array if array.flags.c_contiguous else array.copy()


def _wrapped(indices: np.ndarray, size: int | np.ndarray) -> np.ndarray:
    """Indices with negative ones counted from the end."""
    return np.where(indices < 0, indices + size, indices)


def _element_index(indices: np.ndarray, axis: int, size: int) -> tuple[np.ndarray, ...]:
    """The fancy index of Gather/ScatterElements: ``indices`` on ``axis``, positions elsewhere."""
    grid: list[np.ndarray] = list(np.indices(indices.shape, sparse=True))
    grid[axis] = _wrapped(indices, size)
    return tuple(grid)


# ---------------------------------------------------------------------------- reshaping


@KERNELS.register("Reshape")
def reshape(ctx: KernelContext, data: np.ndarray, shape: np.ndarray | None = None) -> np.ndarray:
    target = _listed(ctx, "shape", shape, since=5) or []
    copy_zeros = not ctx.attrs.get("allowzero", 0)
    return data.reshape(
        [data.shape[i] if size == 0 and copy_zeros else size for i, size in enumerate(target)]
    )


@KERNELS.register("Transpose")
def transpose(ctx: KernelContext, data: np.ndarray) -> np.ndarray:
    return _compact(np.transpose(data, ctx.attrs.get("perm")))


@KERNELS.register("Flatten")
def flatten(ctx: KernelContext, data: np.ndarray) -> np.ndarray:
    axis = ctx.attrs["axis"]
    axis = axis + data.ndim if axis < 0 else axis
    return data.reshape(math.prod(data.shape[:axis]), math.prod(data.shape[axis:]))


@KERNELS.register("Unsqueeze")
def unsqueeze(ctx: KernelContext, data: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
    listed = _listed(ctx, "axes", axes, since=13) or []
    rank = data.ndim + len(listed)
    inserted = {_fixed_axis(axis, rank) for axis in listed}
    if len(inserted) != len(listed):
        raise ValueError(f"Unsqueeze axes {listed} repeat an axis")
    sizes = iter(data.shape)
    return data.reshape([1 if axis in inserted else next(sizes) for axis in range(rank)])


@KERNELS.register("Squeeze")
def squeeze(ctx: KernelContext, data: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
    listed = _listed(ctx, "axes", axes, since=13)
    return np.squeeze(data, tuple(listed) if listed else None)


@KERNELS.register("Identity")
def identity(ctx: KernelContext, data: np.ndarray) -> np.ndarray:
    return data


def _block_mode(crd_since: int) -> CheckFn:
    """Refuses block modes other than DCR, and CRD before opset ``crd_since``."""
    return one_of("mode", "DCR", lambda opset: {"DCR", "CRD"} if opset >= crd_since else {"DCR"})


@KERNELS.register("DepthToSpace", check=_block_mode(11))
def depth_to_space(ctx: KernelContext, data: np.ndarray) -> np.ndarray:
    block, (n, c, h, w) = ctx.attrs["blocksize"], data.shape
    depth = c // (block * block)
    if as_text(ctx.attrs.get("mode", "DCR")) == "DCR":
        blocks = data.reshape(n, block, block, depth, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        blocks = data.reshape(n, depth, block, block, h, w).transpose(0, 1, 4, 2, 5, 3)
    return blocks.reshape(n, depth, h * block, w * block)


@KERNELS.register("SpaceToDepth", check=_block_mode(28))
def space_to_depth(ctx: KernelContext, data: np.ndarray) -> np.ndarray:
    block, (n, c, h, w) = ctx.attrs["blocksize"], data.shape
    blocks = data.reshape(n, c, h // block, block, w // block, block)
    if as_text(ctx.attrs.get("mode", "DCR")) == "DCR":
        blocks = blocks.transpose(0, 3, 5, 1, 2, 4)
    else:
        blocks = blocks.transpose(0, 1, 3, 5, 2, 4)
    return blocks.reshape(n, c * block * block, h // block, w // block)


# ---------------------------------------------------------------------------- slicing and joining


@KERNELS.register("Slice")
def slice_(
    ctx: KernelContext,
    data: np.ndarray,
    starts: np.ndarray | None = None,
    ends: np.ndarray | None = None,
    axes: np.ndarray | None = None,
    steps: np.ndarray | None = None,
) -> np.ndarray:
    begin, end = _required(ctx, "starts", starts, since=10), _required(ctx, "ends", ends, since=10)
    axes_list = _listed(ctx, "axes", axes, since=10)
    if axes_list is None:
        axes_list = list(range(len(begin)))
    step = [1] * len(begin) if steps is None else _ints(steps)
    if not len(begin) == len(end) == len(axes_list) == len(step):
        raise ValueError("Slice starts, ends, axes and steps differ in length")
    index = [slice(None)] * data.ndim
    for axis, first, last, stride in zip(axes_list, begin, end, step, strict=True):
        if stride == 0:
            raise ValueError("Slice step cannot be 0")
        index[_fixed_axis(axis, data.ndim)] = slice(first, last, stride)
    return _compact(data[tuple(index)])


@KERNELS.register("Concat")
def concat(ctx: KernelContext, *inputs: np.ndarray) -> np.ndarray:
    return np.concatenate(inputs, axis=ctx.attrs.get("axis", 1))


@KERNELS.register("Split")
def split(ctx: KernelContext, data: np.ndarray, sizes: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    axis = _fixed_axis(ctx.attrs.get("axis", 0), data.ndim)
    count = len(ctx.node.outputs)
    listed = ctx.attrs.get("split")
    if listed is None and sizes is not None:
        listed = _ints(sizes)
    if listed is None:
        listed = _equal_parts(data.shape[axis], count)
    if len(listed) != count or sum(listed) != data.shape[axis] or min(listed) < 0:
        raise ValueError(f"cannot split an axis of size {data.shape[axis]} into {listed}")
    parts = np.split(data, np.cumsum(listed)[:-1], axis=axis)
    return tuple(_compact(part) for part in parts)


def _equal_parts(size: int, count: int) -> list[int]:
    """Split sizes of ``count`` equal parts; the last is smaller when ``size`` does not divide."""
    chunk = -(-size // count)
    return [chunk] * (count - 1) + [size - chunk * (count - 1)]


_pad_modes = one_of(
    "mode", "constant", lambda opset: {"constant", "reflect", "edge"} | ({"wrap"} if opset >= 19 else set())
)


@KERNELS.register("Pad", check=_pad_modes)
def pad(
    ctx: KernelContext,
    data: np.ndarray,
    pads: np.ndarray | None = None,
    constant_value: np.ndarray | None = None,
    axes: np.ndarray | None = None,
) -> np.ndarray:
    widths = _required(ctx, "paddings" if ctx.opset < 2 else "pads", pads, since=11)
    axes_list = list(range(data.ndim)) if axes is None else [_fixed_axis(a, data.ndim) for a in _ints(axes)]
    if len(widths) != 2 * len(axes_list):
        raise ValueError(f"pads has {len(widths)} values for {len(axes_list)} axes")
    begins, ends = [0] * data.ndim, [0] * data.ndim
    for i, axis in enumerate(axes_list):
        begins[axis], ends[axis] = widths[i], widths[i + len(axes_list)]
    cropped = data[
        tuple(
            slice(max(-b, 0), size - max(-e, 0)) for b, e, size in zip(begins, ends, data.shape, strict=True)
        )
    ]
    padding = [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends, strict=True)]
    mode = as_text(ctx.attrs["mode"])
    if mode == "reflect" and all(max(pair) < size for pair, size in zip(padding, cropped.shape, strict=True)):
        return _reflect(cropped, padding)
    if mode != "constant":
        return np.pad(cropped, padding, mode=mode)  # type: ignore[call-overload]  # a mode _pad_modes allows
    return np.pad(cropped, padding, constant_values=_pad_value(ctx, data, constant_value))


def _reflect(data: np.ndarray, padding: list[tuple[int, int]]) -> np.ndarray:
    """``numpy.pad(data, padding, mode="reflect")`` for pads shorter than their axis, by slice copies
    (numpy's general padding costs far more on small arrays). Axis by axis, as numpy pads."""
    out = np.empty([b + size + e for (b, e), size in zip(padding, data.shape, strict=True)], data.dtype)
    out[tuple(slice(b, b + size) for (b, _), size in zip(padding, data.shape, strict=True))] = data
    for axis, ((begin, end), size) in enumerate(zip(padding, data.shape, strict=True)):
        last = begin + size - 1  # the last element of the data along this axis
        if begin:
            out[_along(axis, slice(0, begin))] = out[_along(axis, slice(2 * begin, begin, -1))]
        if end:
            mirrored = slice(last - 1, last - 1 - end if last > end else None, -1)
            out[_along(axis, slice(last + 1, None))] = out[_along(axis, mirrored)]
    return out


def _along(axis: int, part: slice) -> tuple[slice, ...]:
    """The index of ``part`` of ``axis``, all of the axes before it."""
    return (slice(None),) * axis + (part,)


def _pad_value(ctx: KernelContext, data: np.ndarray, constant_value: np.ndarray | None):
    if ctx.opset < 11:
        return ctx.attrs["value"]
    if constant_value is not None and constant_value.size:
        return constant_value.reshape(-1)[0]
    return "" if data.dtype == object else 0


@KERNELS.register("Expand")
def expand(ctx: KernelContext, data: np.ndarray, shape: np.ndarray) -> np.ndarray:
    return np.broadcast_to(data, np.broadcast_shapes(data.shape, tuple(_ints(shape)))).copy()


@KERNELS.register("Tile")
def tile(
    ctx: KernelContext, data: np.ndarray, repeats: np.ndarray, axis: np.ndarray | None = None
) -> np.ndarray:
    if ctx.opset < 6:
        counts = [1] * data.ndim
        counts[_fixed_axis(scalar(axis), data.ndim)] = scalar(repeats)
    else:
        counts = _ints(repeats)
    if len(counts) != data.ndim:
        raise ValueError(f"Tile has {len(counts)} repeats for rank {data.ndim}")
    return np.tile(data, counts)


# ---------------------------------------------------------------------------- shape queries


@KERNELS.register("Shape")
def shape(ctx: KernelContext, data: np.ndarray) -> np.ndarray:
    return np.array(data.shape[ctx.attrs.get("start", 0) : ctx.attrs.get("end")], dtype=INT64)


@KERNELS.register("Size")
def size(ctx: KernelContext, data: np.ndarray) -> np.ndarray:
    return np.array(data.size, dtype=INT64)


# ---------------------------------------------------------------------------- indexing


@KERNELS.register("Gather")
def gather(ctx: KernelContext, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    return np.take(data, indices, axis=_fixed_axis(ctx.attrs.get("axis", 0), data.ndim))


@KERNELS.register("GatherElements")
def gather_elements(ctx: KernelContext, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    axis = _fixed_axis(ctx.attrs.get("axis", 0), data.ndim)
    return data[_element_index(indices, axis, data.shape[axis])]


def _nd_points(indices: np.ndarray, dims: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """The fancy index of the index tuples along the last axis of ``indices`` into ``dims``."""
    depth = indices.shape[-1]
    if depth > len(dims):
        raise IndexError(f"indices of depth {depth} exceed data of rank {len(dims)}")
    return tuple(np.moveaxis(_wrapped(indices, np.array(dims[:depth], dtype=INT64)), -1, 0))


@KERNELS.register("GatherND")
def gather_nd(ctx: KernelContext, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    batch = ctx.attrs.get("batch_dims", 0)
    batches = math.prod(data.shape[:batch])
    flat = data.reshape(batches, *data.shape[batch:])
    points = indices.reshape(batches, math.prod(indices.shape[batch:-1]), indices.shape[-1])
    index = (np.arange(batches)[:, None], *_nd_points(points, data.shape[batch:]))
    return flat[index].reshape(*indices.shape[:-1], *data.shape[batch + indices.shape[-1] :])


#: ``ufunc.at`` of each Scatter reduction; None replaces.
_REDUCTIONS = {"none": None, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


_reductions = one_of(
    "reduction", "none", lambda opset: {"none", "add", "mul"} | ({"max", "min"} if opset >= 18 else set())
)


def _scatter(ctx: KernelContext, data: np.ndarray, index: tuple[np.ndarray, ...], updates: np.ndarray):
    out = data.copy()
    combine = _REDUCTIONS[as_text(ctx.attrs.get("reduction", "none"))]
    if combine is None:
        out[index] = updates
    else:
        combine.at(out, index, updates)
    return out


@KERNELS.register("ScatterND", check=_reductions)
def scatter_nd(ctx: KernelContext, data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
    return _scatter(ctx, data, _nd_points(indices, data.shape), updates)


@KERNELS.register("ScatterElements", check=_reductions)
def scatter_elements(
    ctx: KernelContext, data: np.ndarray, indices: np.ndarray, updates: np.ndarray
) -> np.ndarray:
    axis = _fixed_axis(ctx.attrs.get("axis", 0), data.ndim)
    return _scatter(ctx, data, _element_index(indices, axis, data.shape[axis]), updates)


@KERNELS.register("Compress")
def compress(ctx: KernelContext, data: np.ndarray, condition: np.ndarray) -> np.ndarray:
    axis = ctx.attrs.get("axis")
    source = data.reshape(-1) if axis is None else data
    axis = 0 if axis is None else _fixed_axis(axis, data.ndim)
    keep = condition.reshape(-1).astype(bool)
    if keep.size > source.shape[axis]:
        raise IndexError(f"condition of length {keep.size} is longer than the axis ({source.shape[axis]})")
    return np.compress(keep, source, axis=axis)


@KERNELS.register("NonZero")
def non_zero(ctx: KernelContext, data: np.ndarray) -> np.ndarray:
    return np.array(np.nonzero(data.reshape(-1) if data.ndim == 0 else data), dtype=INT64)


@KERNELS.register("TopK")
def top_k(ctx: KernelContext, data: np.ndarray, k: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    count = ctx.attrs["k"] if ctx.opset < 10 else scalar(k)
    axis = _fixed_axis(ctx.attrs.get("axis", -1), data.ndim)
    if not 0 <= count <= data.shape[axis]:
        raise ValueError(f"k={count} is out of range for an axis of size {data.shape[axis]}")
    order = _stable_order(data, axis, descending=bool(ctx.attrs.get("largest", 1)))
    indices = np.take(order, np.arange(count), axis=axis)
    return np.take_along_axis(data, indices, axis=axis), indices.astype(INT64)


def _stable_order(data: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Sorting indices along ``axis``; equal values keep their index order either way."""
    if not descending:
        return np.argsort(data, axis=axis, kind="stable")
    backwards = np.argsort(np.flip(data, axis), axis=axis, kind="stable")
    return data.shape[axis] - 1 - np.flip(backwards, axis)


@KERNELS.register("Unique")
def unique(ctx: KernelContext, data: np.ndarray) -> tuple[np.ndarray, ...]:
    axis = ctx.attrs.get("axis")
    if axis is not None:
        axis = _fixed_axis(axis, data.ndim)
    values, first, inverse, counts = np.unique(
        data, return_index=True, return_inverse=True, return_counts=True, axis=axis
    )
    inverse = inverse.reshape(-1)
    if not ctx.attrs.get("sorted", 1):
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        values = np.take(values, order, axis=axis or 0)
        first, inverse, counts = first[order], rank[inverse], counts[order]
    return values, first.astype(INT64), inverse.astype(INT64), counts.astype(INT64)


@KERNELS.register("OneHot")
def one_hot(ctx: KernelContext, indices: np.ndarray, depth: np.ndarray, values: np.ndarray) -> np.ndarray:
    size = int(np.asarray(depth).reshape(-1)[0])
    axis = ctx.attrs.get("axis", -1)
    axis = _fixed_axis(axis, indices.ndim + 1)
    hot = _wrapped(indices.astype(INT64), size)[..., None] == np.arange(size)
    off, on = values.reshape(-1)[:2]
    return np.where(np.moveaxis(hot, -1, axis), on, off).astype(values.dtype)


@KERNELS.register("ReverseSequence")
def reverse_sequence(ctx: KernelContext, data: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    batch_axis, time_axis = ctx.attrs["batch_axis"], ctx.attrs["time_axis"]
    steps = np.arange(data.shape[time_axis])
    lengths = lengths.astype(INT64)[:, None]
    source = np.where(steps < lengths, lengths - 1 - steps, steps)
    if batch_axis > time_axis:
        source = source.T
    layout = [1] * data.ndim
    layout[batch_axis], layout[time_axis] = data.shape[batch_axis], data.shape[time_axis]
    return np.take_along_axis(data, source.reshape(layout), axis=time_axis)


@KERNELS.register("Trilu")
def trilu(ctx: KernelContext, data: np.ndarray, k: np.ndarray | None = None) -> np.ndarray:
    diagonal = 0 if k is None else scalar(k)
    return np.triu(data, diagonal) if ctx.attrs["upper"] else np.tril(data, diagonal)


# ---------------------------------------------------------------------------- generators


@KERNELS.register("Constant", check=valid_when(lambda node: constant_value(node.attrs)))
def constant(ctx: KernelContext) -> np.ndarray:
    return constant_value(ctx.attrs).copy()


@KERNELS.register("ConstantOfShape")
def constant_of_shape(ctx: KernelContext, shape: np.ndarray) -> np.ndarray:
    value = ctx.attrs.get("value")
    fill = np.zeros((), np.float32) if value is None else np.asarray(value).reshape(-1)[0]
    return np.full(_ints(shape), fill, dtype=np.asarray(fill).dtype)


@KERNELS.register("Range")
def range_(ctx: KernelContext, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
    # Scalars by the spec; one-element tensors too, as onnxruntime accepts them.
    start, limit, delta = (np.asarray(value).reshape(()) for value in (start, limit, delta))
    if delta == 0:
        raise ValueError("Range delta cannot be 0")
    count = range_length(start, limit, delta)
    work = np.float32 if start.dtype.name in HALF_FLOAT_NAMES else start.dtype
    steps = np.arange(count, dtype=work) * delta.astype(work)
    return (start.astype(work) + steps).astype(start.dtype)


@KERNELS.register(
    "EyeLike", check=valid_when(lambda node: "dtype" not in node.attrs or from_onnx(node.attrs["dtype"]))
)
def eye_like(ctx: KernelContext, data: np.ndarray) -> np.ndarray:
    code = ctx.attrs.get("dtype")
    dtype = data.dtype if code is None else from_onnx(code)
    rows, columns = data.shape
    return np.eye(rows, columns, k=ctx.attrs["k"], dtype=dtype)


@KERNELS.register("Dropout")
def dropout(
    ctx: KernelContext,
    data: np.ndarray,
    ratio: np.ndarray | None = None,
    training_mode: np.ndarray | None = None,
) -> tuple[np.ndarray, ...]:
    rate = float(ratio) if ratio is not None else ctx.attrs.get("ratio", 0.5)
    training = training_mode is not None and bool(training_mode) and rate > 0
    if not training:
        mask_dtype = bool if ctx.opset >= 10 else data.dtype
        return (data, np.ones(data.shape, mask_dtype))[: len(ctx.node.outputs)]
    keep = np.random.default_rng(ctx.attrs.get("seed")).random(data.shape) >= rate
    return ((data * keep / (1 - rate)).astype(data.dtype), keep)[: len(ctx.node.outputs)]


# ---------------------------------------------------------------------------- einsum


@KERNELS.register(
    "Einsum", check=valid_when(lambda node: einsum_terms(as_text(node.attrs.get("equation", ""))))
)
def einsum(ctx: KernelContext, *inputs: np.ndarray) -> np.ndarray:
    terms, output = einsum_terms(as_text(ctx.attrs["equation"]))
    operands = [widen(x) for x in inputs]  # numpy's einsum has no 16-bit brain floats
    # The product of the operands' sizes bounds the plain sum's multiply-adds from above.
    with blas_for(math.prod(x.size for x in inputs)):
        result = np.einsum(f"{','.join(terms)}->{output}", *operands, optimize=len(inputs) > 1)
    return np.asarray(result, dtype=inputs[0].dtype)
