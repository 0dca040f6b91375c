"""Tensor and shape-movement operators of ai.onnx: reshaping, indexing, padding, constants.

Shape inference reads constant inputs (Reshape's shape, Slice's starts, ...) where the
output shape depends on values, and says ``None`` wherever it cannot know a dim.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...dtypes import from_onnx
from ...errors import InvalidGraphError
from ...ir import Dim, Shape
from ..schema import REQUIRED, Attribute, InferenceContext, InferFn, OpSchema, TensorType
from ..shapes import as_text, broadcast, constant_ints, dims_product, normalize_axis, same_as_input

INT64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)
#: A Slice end at or beyond this reaches the end of any axis.
INT64_MAX = np.iinfo(np.int64).max

# ---------------------------------------------------------------------------- helpers


def _given(ctx: InferenceContext, index: int) -> bool:
    """Whether the node passes input ``index`` (not omitted, not empty)."""
    return index < len(ctx.node.inputs) and bool(ctx.node.inputs[index])


def _dtype(ctx: InferenceContext, index: int = 0) -> np.dtype | None:
    source = ctx.input(index)
    return None if source is None else source.dtype


def _shape(ctx: InferenceContext, index: int = 0) -> Shape:
    source = ctx.input(index)
    return None if source is None else source.shape


def _length(ctx: InferenceContext, index: int) -> int | None:
    """The static length of a 1-D input, e.g. how many dims a shape input lists."""
    shape = _shape(ctx, index)
    return shape[0] if shape is not None and len(shape) == 1 and isinstance(shape[0], int) else None


def _listed(ctx: InferenceContext, attr: str, index: int, since: int) -> list[int] | None:
    """Ints given as attribute ``attr`` before opset ``since``, as constant input ``index`` from it."""
    if ctx.opset < since:
        value = ctx.attrs.get(attr)
        return None if value is None else [int(item) for item in value]
    return constant_ints(ctx, index) if _given(ctx, index) else None


def _unknown_dims(count: int | None) -> Shape:
    return None if count is None else (None,) * count


def _merge_dims(dims: Sequence[Dim]) -> Dim:
    """One dim that several inputs must share: a known size, a common symbol, or None."""
    known = [dim for dim in dims if isinstance(dim, int)]
    if known:
        return known[0]
    return dims[0] if dims and all(dim == dims[0] for dim in dims) else None


def _scaled(dim: Dim, factor: int) -> Dim:
    if isinstance(dim, int):
        return dim * factor
    return dim if factor == 1 else None


def _grown(dim: Dim, extra: int) -> Dim:
    if isinstance(dim, int):
        return dim + extra
    return dim if extra == 0 else None


def _replaced(shape: tuple[Dim, ...], axis: int, dim: Dim) -> tuple[Dim, ...]:
    return (*shape[:axis], dim, *shape[axis + 1 :])


def _quotient(total: Shape, part: Sequence[Dim]) -> Dim:
    """``product(total) / product(part)``, cancelling symbols that appear on both sides."""
    if total is None or None in total or None in part:
        return None
    numerator = list(total)
    for dim in part:
        if isinstance(dim, str):
            if dim not in numerator:
                return None
            numerator.remove(dim)
    divisor = math.prod(dim for dim in part if isinstance(dim, int))
    symbols = [dim for dim in numerator if isinstance(dim, str)]
    known = math.prod(dim for dim in numerator if isinstance(dim, int))
    if not symbols:
        return known // divisor if divisor else None
    return symbols[0] if len(symbols) == 1 and known == divisor else None


def _ranked(infer_dims: Callable[[InferenceContext, tuple[Dim, ...]], Shape]) -> InferFn:
    """Infer: one output with input 0's dtype and ``infer_dims(ctx, shape)``; None for unknown rank."""

    def infer(ctx: InferenceContext) -> list[TensorType]:
        shape = _shape(ctx)
        return [TensorType(_dtype(ctx), None if shape is None else infer_dims(ctx, shape))]

    return infer


# ---------------------------------------------------------------------------- reshaping


def _infer_reshape(ctx: InferenceContext) -> list[TensorType]:
    shape = _shape(ctx)
    target = _listed(ctx, "shape", 1, since=5)
    if target is None:
        return [TensorType(_dtype(ctx), _unknown_dims(_length(ctx, 1) if ctx.opset >= 5 else None))]
    copy_zeros = not ctx.attrs.get("allowzero", 0)
    dims: list[Dim] = [
        _dim_at(shape, i) if value == 0 and copy_zeros else value for i, value in enumerate(target)
    ]
    if target.count(-1) > 1:
        raise InvalidGraphError(f"shape {target} has more than one -1")
    if -1 in target:
        where = target.index(-1)
        dims[where] = _quotient(shape, dims[:where] + dims[where + 1 :])
    return [TensorType(_dtype(ctx), tuple(dims))]


def _dim_at(shape: Shape, axis: int) -> Dim:
    return shape[axis] if shape is not None and axis < len(shape) else None


def _transpose_dims(ctx: InferenceContext, shape: tuple[Dim, ...]) -> Shape:
    perm = ctx.attrs.get("perm") or range(len(shape) - 1, -1, -1)
    if sorted(perm) != list(range(len(shape))):
        raise InvalidGraphError(f"perm {list(perm)} is not a permutation of {len(shape)} axes")
    return tuple(shape[axis] for axis in perm)


def _flatten_dims(ctx: InferenceContext, shape: tuple[Dim, ...]) -> Shape:
    axis = ctx.attrs["axis"]
    if not -len(shape) <= axis <= len(shape):
        raise InvalidGraphError(f"axis {axis} is out of range for rank {len(shape)}")
    axis = axis + len(shape) if axis < 0 else axis
    return dims_product(shape[:axis]), dims_product(shape[axis:])


def _unsqueeze_dims(ctx: InferenceContext, shape: tuple[Dim, ...]) -> Shape:
    axes = _listed(ctx, "axes", 1, since=13)
    if axes is None:
        length = _length(ctx, 1)
        return _unknown_dims(None if length is None else len(shape) + length)
    rank = len(shape) + len(axes)
    inserted = {normalize_axis(axis, rank) for axis in axes}
    if len(inserted) != len(axes):
        raise InvalidGraphError(f"axes {axes} repeat an axis")
    rest = iter(shape)
    return tuple(1 if axis in inserted else next(rest) for axis in range(rank))


def _squeeze_dims(ctx: InferenceContext, shape: tuple[Dim, ...]) -> Shape:
    if ctx.opset >= 13 and _given(ctx, 1):
        axes = constant_ints(ctx, 1)
        if axes is None:
            length = _length(ctx, 1)
            return _unknown_dims(None if length is None else len(shape) - length)
    else:
        axes = ctx.attrs.get("axes")
    if not axes:
        if not all(isinstance(dim, int) for dim in shape):
            return None
        return tuple(dim for dim in shape if dim != 1)
    removed = {normalize_axis(axis, len(shape)) for axis in axes}
    for axis in removed:
        if isinstance(shape[axis], int) and shape[axis] != 1:
            raise InvalidGraphError(f"cannot squeeze axis {axis} of size {shape[axis]}")
    return tuple(dim for axis, dim in enumerate(shape) if axis not in removed)


def _depth_to_space_dims(ctx: InferenceContext, shape: tuple[Dim, ...]) -> Shape:
    n, c, h, w = _four_dims(shape)
    block = ctx.attrs["blocksize"]
    channels = c // (block * block) if isinstance(c, int) else None
    return n, channels, _scaled(h, block), _scaled(w, block)


def _space_to_depth_dims(ctx: InferenceContext, shape: tuple[Dim, ...]) -> Shape:
    n, c, h, w = _four_dims(shape)
    block = ctx.attrs["blocksize"]
    height, width = (dim // block if isinstance(dim, int) else None for dim in (h, w))
    return n, _scaled(c, block * block), height, width


def _four_dims(shape: tuple[Dim, ...]) -> tuple[Dim, ...]:
    if len(shape) != 4:
        raise InvalidGraphError(f"expects a 4-D input, got rank {len(shape)}")
    return shape


# ---------------------------------------------------------------------------- slicing and joining


def _slice_dim(dim: Dim, start: int, end: int, step: int) -> Dim:
    if step == 0:
        raise InvalidGraphError("Slice step cannot be 0")
    if isinstance(dim, int):
        return len(range(*slice(start, end, step).indices(dim)))
    whole = step == 1 and start in (0, -INT64_MAX - 1) and end >= INT64_MAX
    return dim if whole else None


def _slice_dims(ctx: InferenceContext, shape: tuple[Dim, ...]) -> Shape:
    starts, ends = _listed(ctx, "starts", 1, since=10), _listed(ctx, "ends", 2, since=10)
    axes = _listed(ctx, "axes", 3, since=10)
    if axes is None and (ctx.opset < 10 or not _given(ctx, 3)):
        count = len(starts) if starts is not None else _length(ctx, 1)
        axes = None if count is None else list(range(count))
    if axes is None:
        return _unknown_dims(len(shape))
    axes = [normalize_axis(axis, len(shape)) for axis in axes]
    steps = constant_ints(ctx, 4) if ctx.opset >= 10 and _given(ctx, 4) else [1] * len(axes)
    if starts is None or ends is None or steps is None:
        return tuple(None if axis in axes else dim for axis, dim in enumerate(shape))
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise InvalidGraphError("Slice starts, ends, axes and steps differ in length")
    dims = list(shape)
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        dims[axis] = _slice_dim(shape[axis], start, end, step)
    return tuple(dims)


def _infer_concat(ctx: InferenceContext) -> list[TensorType]:
    dtype = next((t.dtype for t in ctx.inputs if t is not None and t.dtype is not None), None)
    shapes = [None if t is None else t.shape for t in ctx.inputs]
    known = [shape for shape in shapes if shape is not None]
    if not known:
        return [TensorType(dtype, None)]
    rank = len(known[0])
    if any(len(shape) != rank for shape in known):
        raise InvalidGraphError("Concat inputs have different ranks")
    axis = normalize_axis(ctx.attrs.get("axis", 1), rank)
    dims = [_merge_dims([shape[i] for shape in known]) for i in range(rank)]
    sizes = [None if shape is None else shape[axis] for shape in shapes]
    ints = [size for size in sizes if isinstance(size, int)]
    dims[axis] = sum(ints) if len(ints) == len(sizes) else None
    return [TensorType(dtype, tuple(dims))]


def _split_sizes(ctx: InferenceContext, dim: Dim, count: int) -> Sequence[Dim]:
    listed = ctx.attrs.get("split")
    if listed is not None:
        return list(listed)
    if _given(ctx, 1):
        sizes = constant_ints(ctx, 1)
        return [None] * count if sizes is None else sizes
    if not isinstance(dim, int):
        return [None] * count
    chunk = -(-dim // count)
    return [chunk] * (count - 1) + [dim - chunk * (count - 1)]


def _infer_split(ctx: InferenceContext) -> list[TensorType]:
    dtype, shape = _dtype(ctx), _shape(ctx)
    count = len(ctx.node.outputs)
    if shape is None:
        return [TensorType(dtype, None)] * count
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(shape))
    sizes = _split_sizes(ctx, shape[axis], count)
    if len(sizes) != count:
        raise InvalidGraphError(f"split lists {len(sizes)} sizes for {count} outputs")
    return [TensorType(dtype, _replaced(shape, axis, size)) for size in sizes]


def _pad_list(ctx: InferenceContext) -> list[int] | None:
    attr = "paddings" if ctx.opset < 2 else "pads"
    return _listed(ctx, attr, 1, since=11)


def _pad_dims(ctx: InferenceContext, shape: tuple[Dim, ...]) -> Shape:
    pads = _pad_list(ctx)
    axes = constant_ints(ctx, 3) if ctx.opset >= 18 and _given(ctx, 3) else list(range(len(shape)))
    if pads is None or axes is None:
        return _unknown_dims(len(shape))
    if len(pads) != 2 * len(axes):
        raise InvalidGraphError(f"pads has {len(pads)} values for {len(axes)} axes")
    dims = list(shape)
    for i, axis in enumerate(normalize_axis(axis, len(shape)) for axis in axes):
        dims[axis] = _grown(shape[axis], pads[i] + pads[i + len(axes)])
    return tuple(dims)


def _expand_dims(ctx: InferenceContext, shape: tuple[Dim, ...]) -> Shape:
    target = constant_ints(ctx, 1)
    if target is None:
        length = _length(ctx, 1)
        return _unknown_dims(None if length is None else max(length, len(shape)))
    return broadcast(shape, tuple(target))


def _tile_dims(ctx: InferenceContext, shape: tuple[Dim, ...]) -> Shape:
    if ctx.opset < 6:
        tiles, axes = constant_ints(ctx, 1), constant_ints(ctx, 2)
        if axes is None:
            return _unknown_dims(len(shape))
        axis = normalize_axis(axes[0], len(shape))
        return _replaced(shape, axis, None if tiles is None else _scaled(shape[axis], tiles[0]))
    repeats = constant_ints(ctx, 1)
    if repeats is None:
        return _unknown_dims(len(shape))
    if len(repeats) != len(shape):
        raise InvalidGraphError(f"Tile has {len(repeats)} repeats for rank {len(shape)}")
    return tuple(_scaled(dim, count) for dim, count in zip(shape, repeats, strict=True))


# ---------------------------------------------------------------------------- shape queries


def _infer_shape(ctx: InferenceContext) -> list[TensorType]:
    shape = _shape(ctx)
    if shape is None:
        return [TensorType(INT64, (None,))]
    return [TensorType(INT64, (len(range(len(shape))[ctx.attrs.get("start", 0) : ctx.attrs.get("end")]),))]


def _infer_size(ctx: InferenceContext) -> list[TensorType]:
    return [TensorType(INT64, ())]


# ---------------------------------------------------------------------------- indexing


def _infer_gather(ctx: InferenceContext) -> list[TensorType]:
    data, indices = _shape(ctx, 0), _shape(ctx, 1)
    if data is None or indices is None:
        return [TensorType(_dtype(ctx), None)]
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(data))
    return [TensorType(_dtype(ctx), (*data[:axis], *indices, *data[axis + 1 :]))]


def _infer_gather_elements(ctx: InferenceContext) -> list[TensorType]:
    return [TensorType(_dtype(ctx), _shape(ctx, 1))]


def _infer_gather_nd(ctx: InferenceContext) -> list[TensorType]:
    data, indices = _shape(ctx, 0), _shape(ctx, 1)
    if data is None or indices is None or not indices or not isinstance(indices[-1], int):
        return [TensorType(_dtype(ctx), None)]
    batch = ctx.attrs.get("batch_dims", 0)
    if batch + indices[-1] > len(data):
        raise InvalidGraphError(f"indices of depth {indices[-1]} exceed data of rank {len(data)}")
    return [TensorType(_dtype(ctx), (*indices[:-1], *data[batch + indices[-1] :]))]


def _infer_compress(ctx: InferenceContext) -> list[TensorType]:
    shape, axis = _shape(ctx), ctx.attrs.get("axis")
    if axis is None:
        return [TensorType(_dtype(ctx), (_kept(ctx, None if shape is None else dims_product(shape)),))]
    if shape is None:
        return [TensorType(_dtype(ctx), None)]
    axis = normalize_axis(axis, len(shape))
    return [TensorType(_dtype(ctx), _replaced(shape, axis, _kept(ctx, shape[axis])))]


def _kept(ctx: InferenceContext, length: Dim) -> Dim:
    """How many of ``length`` entries Compress keeps, when the condition is constant."""
    condition = ctx.constant(1)
    if condition is None or not isinstance(length, int):
        return None
    return int(np.count_nonzero(condition.reshape(-1)[:length]))


def _infer_non_zero(ctx: InferenceContext) -> list[TensorType]:
    shape = _shape(ctx)
    return [TensorType(INT64, (None if shape is None else max(len(shape), 1), None))]


def _infer_top_k(ctx: InferenceContext) -> list[TensorType]:
    shape = _shape(ctx)
    if shape is None:
        return [TensorType(_dtype(ctx), None), TensorType(INT64, None)]
    given = constant_ints(ctx, 1) if ctx.opset >= 10 else None
    k: Dim = ctx.attrs["k"] if ctx.opset < 10 else (given[0] if given else None)
    dims = _replaced(shape, normalize_axis(ctx.attrs.get("axis", -1), len(shape)), k)
    return [TensorType(_dtype(ctx), dims), TensorType(INT64, dims)]


def _infer_unique(ctx: InferenceContext) -> list[TensorType]:
    shape, axis = _shape(ctx), ctx.attrs.get("axis")
    values: Shape
    inverse: Shape
    if axis is None:
        values = (None,)
        inverse = None if shape is None else (dims_product(shape),)
    elif shape is None:
        values = inverse = None
    else:
        axis = normalize_axis(axis, len(shape))
        values, inverse = _replaced(shape, axis, None), (shape[axis],)
    return [
        TensorType(_dtype(ctx), values),
        TensorType(INT64, (None,)),
        TensorType(INT64, inverse),
        TensorType(INT64, (None,)),
    ]


def _infer_one_hot(ctx: InferenceContext) -> list[TensorType]:
    shape, depth = _shape(ctx), ctx.constant(1)
    if shape is None:
        return [TensorType(_dtype(ctx, 2), None)]
    axis = normalize_axis(ctx.attrs.get("axis", -1), len(shape) + 1)
    size = None if depth is None else int(depth.reshape(-1)[0])
    return [TensorType(_dtype(ctx, 2), (*shape[:axis], size, *shape[axis:]))]


# ---------------------------------------------------------------------------- generators


#: The value attributes of Constant and the dtype each gives (None: the tensor's own).
CONSTANT_DTYPES: dict[str, np.dtype | None] = {
    "value": None,
    "sparse_value": None,
    "value_float": np.dtype(np.float32),
    "value_floats": np.dtype(np.float32),
    "value_int": INT64,
    "value_ints": INT64,
    "value_string": np.dtype(object),
    "value_strings": np.dtype(object),
}


def constant_value(attrs: dict[str, Any]) -> np.ndarray:
    """The tensor a Constant node holds, from whichever ``value*`` attribute it sets."""
    present = [name for name in CONSTANT_DTYPES if attrs.get(name) is not None]
    if len(present) != 1:
        raise InvalidGraphError(f"Constant must set exactly one value attribute, got {present or 'none'}")
    name = present[0]
    value = attrs[name]
    if name in ("value_string", "value_strings"):
        value = [as_text(item) for item in value] if isinstance(value, list) else as_text(value)
    return np.asarray(value, dtype=CONSTANT_DTYPES[name])


def _infer_constant(ctx: InferenceContext) -> list[TensorType]:
    value = constant_value(ctx.attrs)
    return [TensorType(value.dtype, value.shape)]


def _infer_constant_of_shape(ctx: InferenceContext) -> list[TensorType]:
    value = ctx.attrs.get("value")
    dtype = np.dtype(np.float32) if value is None else np.asarray(value).dtype
    dims = constant_ints(ctx, 0)
    return [TensorType(dtype, _unknown_dims(_length(ctx, 0)) if dims is None else tuple(dims))]


def _infer_range(ctx: InferenceContext) -> list[TensorType]:
    values = [value for i in range(3) if (value := ctx.constant(i)) is not None]
    if len(values) < 3:
        return [TensorType(_dtype(ctx), (None,))]
    start, limit, delta = (value.reshape(()) for value in values)
    if delta == 0:
        raise InvalidGraphError("Range delta cannot be 0")
    return [TensorType(_dtype(ctx), (range_length(start, limit, delta),))]


def range_length(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> int:
    """How many elements ``Range(start, limit, delta)`` has: ``max(ceil((limit - start) / delta), 0)``."""
    if np.issubdtype(start.dtype, np.integer):
        return max(-((int(start) - int(limit)) // int(delta)), 0)
    return max(math.ceil(float(limit - start) / float(delta)), 0)


def _infer_eye_like(ctx: InferenceContext) -> list[TensorType]:
    code = ctx.attrs.get("dtype")
    shape = _shape(ctx)
    if shape is not None and len(shape) != 2:
        raise InvalidGraphError(f"EyeLike expects a 2-D input, got rank {len(shape)}")
    return [TensorType(_dtype(ctx) if code is None else from_onnx(code), shape)]


def _infer_dropout(ctx: InferenceContext) -> list[TensorType]:
    mask_dtype = BOOL if ctx.opset >= 10 else _dtype(ctx)
    return [TensorType(_dtype(ctx), _shape(ctx)), TensorType(mask_dtype, _shape(ctx))]


# ---------------------------------------------------------------------------- einsum


def einsum_terms(equation: str) -> tuple[list[str], str]:
    """The input terms and the output term of an Einsum equation (implicit output resolved).

    Each term keeps ``...`` for its broadcast dims; spaces are dropped.
    """
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    allowed = set(string.ascii_letters) | {"."}
    for term in [*terms, output]:
        if not set(term) <= allowed or term.replace("...", "", 1).count(".") or term.count("...") > 1:
            raise InvalidGraphError(f"Einsum equation {equation!r} has a malformed term {term!r}")
    letters = "".join(terms).replace(".", "")
    if not arrow:
        output = ("..." if "..." in inputs else "") + "".join(
            sorted(letter for letter in set(letters) if letters.count(letter) == 1)
        )
    named = output.replace(".", "")
    if not set(named) <= set(letters) or len(set(named)) != len(named):
        raise InvalidGraphError(f"Einsum output {output!r} repeats a letter or names one no input has")
    return terms, output


def _einsum_dims(term: str, shape: tuple[Dim, ...]) -> tuple[dict[str, Dim], tuple[Dim, ...]]:
    """The dim of each letter of one term, and the dims its ``...`` covers."""
    before, _, after = term.partition("...")
    covered = len(shape) - len(before) - len(after)
    if covered < 0 or (covered and "..." not in term):
        raise InvalidGraphError(f"Einsum term {term!r} does not match rank {len(shape)}")
    middle = shape[len(before) : len(before) + covered]
    letters = dict(zip(before, shape, strict=False))
    for letter, dim in zip(after, shape[len(shape) - len(after) :], strict=True):
        letters.setdefault(letter, dim)
    return letters, middle


def _infer_einsum(ctx: InferenceContext) -> list[TensorType]:
    terms, output = einsum_terms(as_text(ctx.attrs["equation"]))
    given = [_shape(ctx, i) for i in range(len(ctx.inputs))]
    if len(terms) != len(given):
        raise InvalidGraphError(f"Einsum equation has {len(terms)} terms for {len(given)} inputs")
    shapes = [shape for shape in given if shape is not None]
    if len(shapes) < len(given):
        return [TensorType(_dtype(ctx), None)]
    sizes: dict[str, list[Dim]] = {}
    broadcast_parts = []
    for term, shape in zip(terms, shapes, strict=True):
        letters, middle = _einsum_dims(term, shape)
        for letter, dim in letters.items():
            sizes.setdefault(letter, []).append(dim)
        broadcast_parts.append(middle)
    joined = broadcast(*broadcast_parts)
    before, _, after = output.partition("...")
    dims = [
        *(_letter_dim(sizes[letter]) for letter in before),
        *(joined if "..." in output else ()),
        *(_letter_dim(sizes[letter]) for letter in after),
    ]
    return [TensorType(_dtype(ctx), tuple(dims))]


def _letter_dim(dims: list[Dim]) -> Dim:
    """The size of an Einsum letter: its operands' dims, where a 1 broadcasts."""
    return _merge_dims([dim for dim in dims if dim != 1] or [1])


# ---------------------------------------------------------------------------- the schemas


def _schema(
    name: str,
    since: int,
    infer: InferFn,
    *attributes: Attribute,
    inputs: tuple[int, int] = (1, 1),
    outputs: tuple[int, int] = (1, 1),
) -> OpSchema:
    """An ai.onnx schema; ``inputs`` and ``outputs`` are (min, max) counts, max -1 for variadic."""
    return OpSchema(name, "", since, inputs, outputs, attributes, infer)


_INT, _INTS, _FLOAT, _STRING, _TENSOR = "int", "ints", "float", "string", "tensor"
_slice = _ranked(_slice_dims)
_same = same_as_input(0)

SCHEMAS: list[OpSchema] = [
    _schema("Reshape", 1, _infer_reshape, Attribute("shape", _INTS), Attribute("consumed_inputs", _INTS)),
    _schema("Reshape", 5, _infer_reshape, inputs=(2, 2)),
    _schema("Reshape", 14, _infer_reshape, Attribute("allowzero", _INT, 0), inputs=(2, 2)),
    _schema("Transpose", 1, _ranked(_transpose_dims), Attribute("perm", _INTS)),
    _schema(
        "Slice",
        1,
        _slice,
        Attribute("starts", _INTS, REQUIRED),
        Attribute("ends", _INTS, REQUIRED),
        Attribute("axes", _INTS),
    ),
    _schema("Slice", 10, _slice, inputs=(3, 5)),
    _schema("Concat", 1, _infer_concat, Attribute("axis", _INT), inputs=(1, -1)),
    _schema("Concat", 4, _infer_concat, Attribute("axis", _INT, REQUIRED), inputs=(1, -1)),
    _schema("Shape", 1, _infer_shape),
    _schema("Shape", 15, _infer_shape, Attribute("start", _INT, 0), Attribute("end", _INT)),
    _schema("Size", 1, _infer_size),
    _schema("Unsqueeze", 1, _ranked(_unsqueeze_dims), Attribute("axes", _INTS, REQUIRED)),
    _schema("Unsqueeze", 13, _ranked(_unsqueeze_dims), inputs=(2, 2)),
    _schema("Squeeze", 1, _ranked(_squeeze_dims), Attribute("axes", _INTS)),
    _schema("Squeeze", 13, _ranked(_squeeze_dims), inputs=(1, 2)),
    _schema("Flatten", 1, _ranked(_flatten_dims), Attribute("axis", _INT, 1)),
    _schema("Gather", 1, _infer_gather, Attribute("axis", _INT, 0), inputs=(2, 2)),
    _schema("GatherElements", 11, _infer_gather_elements, Attribute("axis", _INT, 0), inputs=(2, 2)),
    _schema("GatherND", 11, _infer_gather_nd, inputs=(2, 2)),
    _schema("GatherND", 12, _infer_gather_nd, Attribute("batch_dims", _INT, 0), inputs=(2, 2)),
    _schema("ScatterND", 11, _same, inputs=(3, 3)),
    _schema("ScatterND", 16, _same, Attribute("reduction", _STRING, "none"), inputs=(3, 3)),
    _schema("ScatterElements", 11, _same, Attribute("axis", _INT, 0), inputs=(3, 3)),
    _schema(
        "ScatterElements",
        16,
        _same,
        Attribute("axis", _INT, 0),
        Attribute("reduction", _STRING, "none"),
        inputs=(3, 3),
    ),
    _schema("Expand", 8, _ranked(_expand_dims), inputs=(2, 2)),
    _schema("Tile", 1, _ranked(_tile_dims), inputs=(3, 3)),
    _schema("Tile", 6, _ranked(_tile_dims), inputs=(2, 2)),
    _schema("Range", 11, _infer_range, inputs=(3, 3)),
    _schema("Range", 27, _infer_range, Attribute("stash_type", _INT, 1), inputs=(3, 3)),
    _schema(
        "Split",
        1,
        _infer_split,
        Attribute("axis", _INT, 0),
        Attribute("split", _INTS),
        inputs=(1, 2),
        outputs=(1, -1),
    ),
    _schema("Split", 2, _infer_split, Attribute("axis", _INT, 0), Attribute("split", _INTS), outputs=(1, -1)),
    _schema("Split", 13, _infer_split, Attribute("axis", _INT, 0), inputs=(1, 2), outputs=(1, -1)),
    _schema(
        "Split",
        18,
        _infer_split,
        Attribute("axis", _INT, 0),
        Attribute("num_outputs", _INT),
        inputs=(1, 2),
        outputs=(1, -1),
    ),
    _schema(
        "Pad",
        1,
        _ranked(_pad_dims),
        Attribute("paddings", _INTS, REQUIRED),
        Attribute("mode", _STRING, "constant"),
        Attribute("value", _FLOAT, 0.0),
    ),
    _schema(
        "Pad",
        2,
        _ranked(_pad_dims),
        Attribute("pads", _INTS, REQUIRED),
        Attribute("mode", _STRING, "constant"),
        Attribute("value", _FLOAT, 0.0),
    ),
    _schema("Pad", 11, _ranked(_pad_dims), Attribute("mode", _STRING, "constant"), inputs=(2, 3)),
    _schema("Pad", 18, _ranked(_pad_dims), Attribute("mode", _STRING, "constant"), inputs=(2, 4)),
    _schema("Constant", 1, _infer_constant, Attribute("value", _TENSOR, REQUIRED), inputs=(0, 0)),
    _schema(
        "Constant",
        11,
        _infer_constant,
        Attribute("value", _TENSOR),
        Attribute("sparse_value", _TENSOR),
        inputs=(0, 0),
    ),
    _schema(
        "Constant",
        12,
        _infer_constant,
        Attribute("value", _TENSOR),
        Attribute("sparse_value", _TENSOR),
        Attribute("value_float", _FLOAT),
        Attribute("value_floats", "floats"),
        Attribute("value_int", _INT),
        Attribute("value_ints", _INTS),
        Attribute("value_string", _STRING),
        Attribute("value_strings", "strings"),
        inputs=(0, 0),
    ),
    _schema("ConstantOfShape", 9, _infer_constant_of_shape, Attribute("value", _TENSOR)),
    _schema("Identity", 1, _same),
    _schema(
        "Dropout",
        1,
        _infer_dropout,
        Attribute("ratio", _FLOAT, 0.5),
        Attribute("is_test", _INT, 0),
        Attribute("consumed_inputs", _INTS),
        outputs=(1, 2),
    ),
    _schema(
        "Dropout",
        6,
        _infer_dropout,
        Attribute("ratio", _FLOAT, 0.5),
        Attribute("is_test", _INT, 0),
        outputs=(1, 2),
    ),
    _schema("Dropout", 7, _infer_dropout, Attribute("ratio", _FLOAT, 0.5), outputs=(1, 2)),
    _schema("Dropout", 12, _infer_dropout, Attribute("seed", _INT), inputs=(1, 3), outputs=(1, 2)),
    _schema("NonZero", 9, _infer_non_zero),
    _schema(
        "TopK", 1, _infer_top_k, Attribute("k", _INT, REQUIRED), Attribute("axis", _INT, -1), outputs=(2, 2)
    ),
    _schema("TopK", 10, _infer_top_k, Attribute("axis", _INT, -1), inputs=(2, 2), outputs=(2, 2)),
    _schema(
        "TopK",
        11,
        _infer_top_k,
        Attribute("axis", _INT, -1),
        Attribute("largest", _INT, 1),
        Attribute("sorted", _INT, 1),
        inputs=(2, 2),
        outputs=(2, 2),
    ),
    _schema("OneHot", 9, _infer_one_hot, Attribute("axis", _INT, -1), inputs=(3, 3)),
    _schema("DepthToSpace", 1, _ranked(_depth_to_space_dims), Attribute("blocksize", _INT, REQUIRED)),
    _schema(
        "DepthToSpace",
        11,
        _ranked(_depth_to_space_dims),
        Attribute("blocksize", _INT, REQUIRED),
        Attribute("mode", _STRING, "DCR"),
    ),
    _schema("SpaceToDepth", 1, _ranked(_space_to_depth_dims), Attribute("blocksize", _INT, REQUIRED)),
    _schema(
        "SpaceToDepth",
        28,
        _ranked(_space_to_depth_dims),
        Attribute("blocksize", _INT, REQUIRED),
        Attribute("mode", _STRING, "DCR"),
    ),
    _schema("Trilu", 14, _same, Attribute("upper", _INT, 1), inputs=(1, 2)),
    _schema("EyeLike", 9, _infer_eye_like, Attribute("dtype", _INT), Attribute("k", _INT, 0)),
    _schema("Compress", 9, _infer_compress, Attribute("axis", _INT), inputs=(2, 2)),
    _schema(
        "ReverseSequence",
        10,
        _same,
        Attribute("batch_axis", _INT, 1),
        Attribute("time_axis", _INT, 0),
        inputs=(2, 2),
    ),
    _schema(
        "Unique",
        11,
        _infer_unique,
        Attribute("axis", _INT),
        Attribute("sorted", _INT, 1),
        outputs=(1, 4),
    ),
    _schema("Einsum", 12, _infer_einsum, Attribute("equation", _STRING, REQUIRED), inputs=(1, -1)),
]
