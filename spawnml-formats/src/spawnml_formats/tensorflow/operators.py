"""One lowering per TensorFlow operator, selected from :data:`LOWERINGS` by op name.

Each lowering reads its inputs through :class:`Lowering` (``value`` in TensorFlow's layout,
``channels_first`` for NCHW, ``constant`` for shapes, axes and weights) and defines its
outputs. Operators without a lowering, or whose inputs or attributes a lowering cannot
express (non-constant axes, training-mode batch normalisation, ellipsis slices), become
``tensorflow``-domain nodes named after the op, which sessions refuse by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import DTypeLike
from spawnml import ModelLoadError
from spawnml.dtypes import to_onnx

from .lowering import NCHW, TF, TO_NCHW, Lowering, NotExpressible, Op, channels_first
from .tensors import element_type

Lower = Callable[[Lowering, Op], None]
#: Position in NCHW of each NHWC axis.
NCHW_POSITION = [0, 2, 3, 1]
INT64_MAX, INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


# -- shared pieces -----------------------------------------------------------------------------


def _dtype(op: Op, key: str = "T") -> np.dtype:
    return element_type(op.attr(key, 1, "type"), op.where)


def _scalar(lw: Lowering, op: Op, value: float) -> str:
    """A scalar initializer of the operator's element type."""
    return lw.initializer(np.array(value, _dtype(op)), f"{op.name}/{value:g}")


def _constant(lw: Lowering, name: str, what: str) -> np.ndarray:
    value = lw.constant(name)
    if value is None:
        raise NotExpressible(f"non-constant {what}")
    return value


def _ints(lw: Lowering, name: str, what: str) -> list[int]:
    return [int(item) for item in _constant(lw, name, what).reshape(-1)]


def _cast(lw: Lowering, name: str, dtype: DTypeLike) -> str:
    return lw.emit("Cast", [name], {"to": to_onnx(np.dtype(dtype))})


def _int64(lw: Lowering, name: str, what: str) -> str:
    """An integer input as int64: an initializer when constant, a Cast otherwise."""
    value = lw.constant(name)
    if value is not None:
        return lw.ints(value, what)
    return _cast(lw, lw.value(name), np.int64)


def _four(op: Op, key: str, default: list[int]) -> list[int]:
    values = op.attr(key, default)
    if len(values) != 4 or not all(isinstance(value, int) and value >= 1 for value in values):
        raise ModelLoadError(f"{op.where} has {key} {values}; four positive integers are needed")
    return values


def _spatial_axes(op: Op) -> tuple[str, list[int]]:
    """The data format and the positions of height and width in it."""
    fmt = op.attr("data_format", "NHWC")
    if fmt not in ("NHWC", "NCHW"):
        raise NotExpressible(f"data format {fmt}")
    return fmt, [1, 2] if fmt == "NHWC" else [2, 3]


def _window(op: Op, spatial: list[int]) -> dict[str, Any]:
    """ai.onnx strides and padding of a TensorFlow window operator."""
    strides = _four(op, "strides", [1, 1, 1, 1])
    attrs: dict[str, Any] = {"strides": [strides[axis] for axis in spatial]}
    padding = op.attr("padding", "VALID")
    if padding == "SAME":
        attrs["auto_pad"] = "SAME_UPPER"
    elif padding == "VALID":
        attrs["auto_pad"] = "VALID"
    elif padding == "EXPLICIT":
        explicit = op.attr("explicit_paddings", [])
        if len(explicit) != 8:
            raise ModelLoadError(f"{op.where} has explicit paddings {explicit}")
        pairs = np.asarray(explicit).reshape(4, 2)
        attrs["pads"] = [int(pairs[axis][side]) for side in (0, 1) for axis in spatial]
    else:
        raise NotExpressible(f"padding {padding}")
    return attrs


def _spatial_input(lw: Lowering, op: Op, fmt: str) -> str:
    return lw.channels_first(op.input(0)) if fmt == "NHWC" else lw.value(op.input(0))


def _define_spatial(lw: Lowering, op: Op, fmt: str, name: str) -> None:
    lw.define(op, name, NCHW if fmt == "NHWC" else TF)


# -- elementwise -------------------------------------------------------------------------------

Build = Callable[[Lowering, Op, list[str]], str]


def _onnx(op_type: str) -> Build:
    return lambda lw, op, names: lw.emit(op_type, names)


def _elementwise(build: Build, compute: Callable[..., np.ndarray] | None = None, arity: int = 1) -> Lower:
    """An operator that works element by element: folded at load on constants, in any layout."""

    def lower(lw: Lowering, op: Op) -> None:
        inputs = [op.input(position) for position in range(arity)] if arity else op.inputs
        values = [lw.constant(name) for name in inputs]
        constants = [value for value in values if value is not None]
        if compute is not None and len(constants) == len(values):
            lw.limits.check_shape(np.broadcast_shapes(*(v.shape for v in constants)), op.where)
            lw.fold(op, np.asarray(compute(*constants)).astype(constants[0].dtype, copy=False))
            return
        layout = lw.layout(inputs)
        lw.define(op, build(lw, op, [lw.read(name, layout) for name in inputs]), layout)

    return lower


def _clip(low: float, high: float) -> Build:
    return lambda lw, op, names: lw.emit("Clip", [names[0], _scalar(lw, op, low), _scalar(lw, op, high)])


def _rsqrt(lw: Lowering, op: Op, names: list[str]) -> str:
    return lw.emit("Reciprocal", [lw.emit("Sqrt", names)])


def _square(lw: Lowering, op: Op, names: list[str]) -> str:
    return lw.emit("Mul", [names[0], names[0]])


def _erfc(lw: Lowering, op: Op, names: list[str]) -> str:
    return lw.emit("Sub", [_scalar(lw, op, 1.0), lw.emit("Erf", names)])


def _log1p(lw: Lowering, op: Op, names: list[str]) -> str:
    return lw.emit("Log", [lw.emit("Add", [names[0], _scalar(lw, op, 1.0)])])


def _leaky_relu(lw: Lowering, op: Op, names: list[str]) -> str:
    return lw.emit("LeakyRelu", names, {"alpha": float(op.attr("alpha", 0.2))})


def _cast_to(lw: Lowering, op: Op, names: list[str]) -> str:
    return _cast(lw, names[0], _dtype(op, "DstT"))


def _squared_difference(lw: Lowering, op: Op, names: list[str]) -> str:
    difference = lw.emit("Sub", names)
    return lw.emit("Mul", [difference, difference])


def _not_equal(lw: Lowering, op: Op, names: list[str]) -> str:
    return lw.emit("Not", [lw.emit("Equal", names)])


def _float_only(build: Build) -> Build:
    """Division-like operators whose integer forms round differently in ai.onnx."""

    def checked(lw: Lowering, op: Op, names: list[str]) -> str:
        if _dtype(op).kind != "f":
            raise NotExpressible(f"{op.type} of integers")
        return build(lw, op, names)

    return checked


def _floor_div(lw: Lowering, op: Op, names: list[str]) -> str:
    return lw.emit("Floor", [lw.emit("Div", names)])


def _clip_by_value(lw: Lowering, op: Op, names: list[str]) -> str:
    return lw.emit("Min", [lw.emit("Max", names[:2]), names[2]])


def cast(lw: Lowering, op: Op) -> None:
    value = lw.constant(op.input(0))
    if value is not None:
        lw.fold(op, value.astype(_dtype(op, "DstT")))
        return
    _elementwise(_cast_to)(lw, op)


def bias_add(lw: Lowering, op: Op) -> None:
    fmt, _ = _spatial_axes(op)
    if fmt == "NHWC":
        _elementwise(_onnx("Add"), np.add, arity=2)(lw, op)
        return
    bias = _constant(lw, op.input(1), "bias of an NCHW BiasAdd")
    shaped = lw.initializer(bias.reshape(-1, 1, 1), f"{op.name}/bias")
    lw.define(op, lw.emit("Add", [lw.value(op.input(0)), shaped]))


# -- convolution, pooling, normalisation -------------------------------------------------------


def _conv_attrs(op: Op, spatial: list[int]) -> dict[str, Any]:
    dilations = _four(op, "dilations", [1, 1, 1, 1])
    return _window(op, spatial) | {"dilations": [dilations[axis] for axis in spatial]}


def conv2d(lw: Lowering, op: Op) -> None:
    fmt, spatial = _spatial_axes(op)
    attrs = _conv_attrs(op, spatial)
    filters = lw.constant(op.input(1))
    if filters is None:
        weights = lw.emit("Transpose", [lw.value(op.input(1))], {"perm": [3, 2, 0, 1]})
    else:
        weights = lw.initializer(filters.transpose(3, 2, 0, 1), f"{op.name}/weights")
    _define_spatial(lw, op, fmt, lw.emit("Conv", [_spatial_input(lw, op, fmt), weights], attrs))


def depthwise_conv2d(lw: Lowering, op: Op) -> None:
    fmt, spatial = _spatial_axes(op)
    attrs = _conv_attrs(op, spatial)
    filters = _constant(lw, op.input(1), "depthwise filter")
    if filters.ndim != 4:
        raise ModelLoadError(f"{op.where} has a filter of shape {filters.shape}")
    height, width, channels, multiplier = filters.shape
    weights = filters.reshape(height, width, 1, channels * multiplier).transpose(3, 2, 0, 1)
    attrs["group"] = channels
    inputs = [_spatial_input(lw, op, fmt), lw.initializer(weights, f"{op.name}/weights")]
    _define_spatial(lw, op, fmt, lw.emit("Conv", inputs, attrs))


def conv2d_transpose(lw: Lowering, op: Op) -> None:
    """``Conv2DBackpropInput``: a transposed convolution whose output size ``input_sizes`` gives."""
    fmt, spatial = _spatial_axes(op)
    sizes = _ints(lw, op.input(0), "output size")
    filters = _constant(lw, op.input(1), "transposed convolution filter")
    strides, dilations = _four(op, "strides", [1, 1, 1, 1]), _four(op, "dilations", [1, 1, 1, 1])
    padding = op.attr("padding", "VALID")
    if len(sizes) != 4 or filters.ndim != 4 or padding not in ("SAME", "VALID"):
        raise NotExpressible(f"output size {sizes}, filter rank {filters.ndim}, padding {padding}")
    begins, ends, extra = [], [], []
    for position, axis in enumerate(spatial):
        size, stride = sizes[axis], strides[axis]
        extent = (filters.shape[position] - 1) * dilations[axis] + 1
        steps = -(-size // stride) if padding == "SAME" else (size - extent) // stride + 1
        total = max((steps - 1) * stride + extent - size, 0) if padding == "SAME" else 0
        begins.append(total // 2)
        ends.append(total - total // 2)
        extra.append(size - ((steps - 1) * stride + extent - total))
    attrs = {
        "strides": [strides[axis] for axis in spatial],
        "dilations": [dilations[axis] for axis in spatial],
        "pads": begins + ends,
        "output_padding": extra,
    }
    weights = lw.initializer(filters.transpose(3, 2, 0, 1), f"{op.name}/weights")
    data = lw.channels_first(op.input(2)) if fmt == "NHWC" else lw.value(op.input(2))
    _define_spatial(lw, op, fmt, lw.emit("ConvTranspose", [data, weights], attrs))


def _pool(op_type: str) -> Lower:
    def pool(lw: Lowering, op: Op) -> None:
        fmt, spatial = _spatial_axes(op)
        size = _four(op, "ksize", [1, 1, 1, 1])
        attrs = _window(op, spatial) | {"kernel_shape": [size[axis] for axis in spatial]}
        _define_spatial(lw, op, fmt, lw.emit(op_type, [_spatial_input(lw, op, fmt)], attrs))

    return pool


def fused_batch_norm(lw: Lowering, op: Op) -> None:
    """Inference-mode batch normalisation as one per-channel scale and shift, in either layout."""
    if op.attr("is_training", True):
        raise NotExpressible("training-mode batch normalisation")
    fmt, _ = _spatial_axes(op)
    scale, offset, mean, variance = (
        _constant(lw, op.input(position), "batch normalisation parameter").astype(np.float32)
        for position in range(1, 5)
    )
    factor = scale / np.sqrt(variance + np.float32(op.attr("epsilon", 1e-4)))
    shift = offset - mean * factor
    x = op.input(0)
    layout = lw.layout([x]) if fmt == "NHWC" else TF
    if fmt == "NCHW":
        factor, shift = factor.reshape(-1, 1, 1), shift.reshape(-1, 1, 1)
    elif layout == NCHW:
        factor, shift = channels_first(factor), channels_first(shift)
    scaled = lw.emit("Mul", [lw.read(x, layout), lw.initializer(factor, f"{op.name}/scale")])
    lw.define(op, lw.emit("Add", [scaled, lw.initializer(shift, f"{op.name}/shift")]), layout)


def _pad(mode: str) -> Lower:
    def pad(lw: Lowering, op: Op) -> None:
        if mode == "reflect" and op.attr("mode", "REFLECT") != "REFLECT":
            raise NotExpressible(f"mirror padding mode {op.attr('mode')}")
        paddings = _constant(lw, op.input(1), "paddings").astype(np.int64).reshape(-1, 2)
        x = op.input(0)
        layout = NCHW if lw.tensor(x).nchw is not None and len(paddings) == 4 else TF
        if layout == NCHW:
            paddings = paddings[TO_NCHW]
        inputs = [lw.read(x, layout), lw.ints(np.concatenate([paddings[:, 0], paddings[:, 1]]), "pads")]
        if len(op.inputs) > 2:
            inputs.append(lw.value(op.input(2)))
        lw.define(op, lw.emit("Pad", inputs, {"mode": mode}), layout)

    return pad


def _reduce(op_type: str, compute: Callable[..., np.ndarray]) -> Lower:
    def reduce(lw: Lowering, op: Op) -> None:
        axes = _ints(lw, op.input(1), "reduction axes")
        keep = op.attr("keep_dims", False)
        x = op.input(0)
        if not axes:
            lw.alias(op, x)
            return
        value = lw.constant(x)
        if value is not None and (op_type != "ReduceMean" or value.dtype.kind == "f"):
            lw.fold(op, compute(value, axis=tuple(axes), keepdims=keep).astype(value.dtype))
            return
        layout, result = TF, TF
        if lw.tensor(x).nchw is not None and all(-4 <= axis < 4 for axis in axes):
            axes = [NCHW_POSITION[axis % 4] for axis in axes]
            kept = [position for position in NCHW_POSITION if position not in axes]
            if keep or kept == sorted(kept):
                layout, result = NCHW, NCHW if keep else TF
            else:
                axes = _ints(lw, op.input(1), "reduction axes")
        attrs = {"keepdims": int(keep)}
        lw.define(op, lw.emit(op_type, [lw.read(x, layout), lw.ints(axes, "axes")], attrs), result)

    return reduce


def concat(lw: Lowering, op: Op) -> None:
    values = op.inputs[:-1]
    axis = _ints(lw, op.inputs[-1], "concatenation axis")[0]
    constants = [value for name in values if (value := lw.constant(name)) is not None]
    if values and len(constants) == len(values):
        lw.fold(op, np.concatenate(constants, axis))
        return
    layout = lw.layout(values)
    if layout == NCHW:
        axis = NCHW_POSITION[axis % 4]
    lw.define(op, lw.emit("Concat", [lw.read(name, layout) for name in values], {"axis": axis}), layout)


def _softmax(op_type: str) -> Lower:
    return lambda lw, op: lw.define(op, lw.emit(op_type, [lw.value(op.input(0))], {"axis": -1}))


# -- matrices ----------------------------------------------------------------------------------


def _operand(lw: Lowering, name: str, swapped: bool) -> str:
    """A matrix operand, its last two axes swapped at load when ``swapped`` (constants only)."""
    if not swapped:
        return lw.value(name)
    value = lw.constant(name)
    if value is None:
        raise NotExpressible("the adjoint of a computed matrix")
    return lw.initializer(np.swapaxes(value, -1, -2), f"{name}/adjoint")


def matmul(lw: Lowering, op: Op) -> None:
    inputs = []
    for position, flag in ((0, "transpose_a"), (1, "transpose_b")):
        name, swapped = op.input(position), op.attr(flag, False)
        if swapped and lw.constant(name) is None:  # a matrix: its transpose is a node
            inputs.append(lw.emit("Transpose", [lw.value(name)], {"perm": [1, 0]}))
        else:
            inputs.append(_operand(lw, name, swapped))
    lw.define(op, lw.emit("MatMul", inputs))


def batch_matmul(lw: Lowering, op: Op) -> None:
    inputs = [
        _operand(lw, op.input(0), op.attr("adj_x", False)),
        _operand(lw, op.input(1), op.attr("adj_y", False)),
    ]
    lw.define(op, lw.emit("MatMul", inputs))


def einsum(lw: Lowering, op: Op) -> None:
    equation = op.attr("equation", "")
    lw.define(op, lw.emit("Einsum", [lw.value(name) for name in op.inputs], {"equation": equation}))


# -- shapes and indexing -----------------------------------------------------------------------


def reshape(lw: Lowering, op: Op) -> None:
    x, shape = op.input(0), op.input(1)
    value, dims = lw.constant(x), lw.constant(shape)
    if value is not None and dims is not None:
        lw.fold(op, value.reshape([int(dim) for dim in dims.reshape(-1)]))
        return
    lw.define(op, lw.emit("Reshape", [lw.value(x), _int64(lw, shape, "shape")], {"allowzero": 1}))


def transpose(lw: Lowering, op: Op) -> None:
    perm = _ints(lw, op.input(1), "permutation")
    value = lw.constant(op.input(0))
    if value is not None and sorted(perm) == list(range(value.ndim)):
        lw.fold(op, value.transpose(perm))
        return
    lw.define(op, lw.emit("Transpose", [lw.value(op.input(0))], {"perm": perm}))


def expand_dims(lw: Lowering, op: Op) -> None:
    axes = _ints(lw, op.input(1), "axis")
    value = lw.constant(op.input(0))
    if value is not None and len(axes) == 1 and -value.ndim - 1 <= axes[0] <= value.ndim:
        lw.fold(op, np.expand_dims(value, axes[0]))
        return
    lw.define(op, lw.emit("Unsqueeze", [lw.value(op.input(0)), lw.ints(axes, "axes")]))


def squeeze(lw: Lowering, op: Op) -> None:
    axes = op.attr("squeeze_dims", [])
    inputs = [lw.value(op.input(0))] + ([lw.ints(axes, "axes")] if axes else [])
    lw.define(op, lw.emit("Squeeze", inputs))


def shape(lw: Lowering, op: Op) -> None:
    result = lw.emit("Shape", [lw.value(op.input(0))])
    dtype = _dtype(op, "out_type") if "out_type" in op.node.attr else np.dtype(np.int32)
    lw.define(op, result if dtype == np.int64 else _cast(lw, result, dtype))


def strided_slice(lw: Lowering, op: Op) -> None:
    if op.attr("ellipsis_mask", 0) or op.attr("new_axis_mask", 0):
        raise NotExpressible("ellipsis or new-axis strided slices")
    begin, end, strides = (_ints(lw, op.input(position), "slice bounds") for position in (1, 2, 3))
    if not len(begin) == len(end) == len(strides):
        raise ModelLoadError(f"{op.where} has bounds of different lengths")
    begin_mask, end_mask, shrink = (op.attr(key, 0) for key in ("begin_mask", "end_mask", "shrink_axis_mask"))
    starts, ends, steps, squeezed = [], [], [], []
    for axis, (start, stop, step) in enumerate(zip(begin, end, strides, strict=True)):
        if step == 0:
            raise ModelLoadError(f"{op.where} has a zero stride")
        if shrink >> axis & 1:
            stop, step = (INT64_MAX if start == -1 else start + 1), 1
            squeezed.append(axis)
        else:
            if begin_mask >> axis & 1:
                start = 0 if step > 0 else INT64_MAX
            if end_mask >> axis & 1:
                stop = INT64_MAX if step > 0 else INT64_MIN
        starts.append(start)
        ends.append(stop)
        steps.append(step)
    inputs = [lw.value(op.input(0)), lw.ints(starts, "starts"), lw.ints(ends, "ends")]
    sliced = lw.emit("Slice", [*inputs, lw.ints(range(len(starts)), "axes"), lw.ints(steps, "steps")])
    if squeezed:
        sliced = lw.emit("Squeeze", [sliced, lw.ints(squeezed, "squeezed")])
    lw.define(op, sliced)


def slice_(lw: Lowering, op: Op) -> None:
    begin, size = _ints(lw, op.input(1), "slice begin"), _ints(lw, op.input(2), "slice size")
    ends = [INT64_MAX if length == -1 else start + length for start, length in zip(begin, size, strict=True)]
    inputs = [lw.value(op.input(0)), lw.ints(begin, "starts"), lw.ints(ends, "ends")]
    lw.define(op, lw.emit("Slice", [*inputs, lw.ints(range(len(begin)), "axes")]))


def pack(lw: Lowering, op: Op) -> None:
    axis = op.attr("axis", 0)
    values = [value for name in op.inputs if (value := lw.constant(name)) is not None]
    if op.inputs and len(values) == len(op.inputs):
        lw.fold(op, np.stack(values, axis))
        return
    axes = lw.ints([axis], "axis")
    parts = [lw.emit("Unsqueeze", [lw.value(name), axes]) for name in op.inputs]
    lw.define(op, lw.emit("Concat", parts, {"axis": axis}))


def _split_outputs(lw: Lowering, op: Op, inputs: list[str], axis: int, count: int, drop: bool) -> None:
    """Define ``count`` outputs of ``op`` as the parts of a Split (squeezed for Unpack)."""
    attrs = {"axis": axis} if len(inputs) > 1 else {"axis": axis, "num_outputs": count}
    for index, name in enumerate(lw.emit_outputs("Split", inputs, count, attrs)):
        if drop:
            name = lw.emit("Squeeze", [name, lw.ints([axis], "axis")])
        lw.define(op, name, index=index)


def unpack(lw: Lowering, op: Op) -> None:
    count, axis = op.attr("num", 0), op.attr("axis", 0)
    _split_outputs(lw, op, [lw.value(op.input(0))], axis, count, drop=True)


def split(lw: Lowering, op: Op) -> None:
    axis = _ints(lw, op.input(0), "split axis")[0]
    _split_outputs(lw, op, [lw.value(op.input(1))], axis, op.attr("num_split", 1), drop=False)


def split_v(lw: Lowering, op: Op) -> None:
    sizes = _ints(lw, op.input(1), "split sizes")
    if any(size < 0 for size in sizes):
        raise NotExpressible("split sizes inferred from the input")
    axis = _ints(lw, op.input(2), "split axis")[0]
    inputs = [lw.value(op.input(0)), lw.ints(sizes, "split")]
    _split_outputs(lw, op, inputs, axis, len(sizes), drop=False)


def gather(lw: Lowering, op: Op) -> None:
    if op.attr("batch_dims", 0):
        raise NotExpressible("batched gathers")
    axis = _ints(lw, op.input(2), "gather axis")[0]
    params, indices = lw.constant(op.input(0)), lw.constant(op.input(1))
    if params is not None and indices is not None:
        lw.fold(op, np.take(params, indices, axis))
        return
    inputs = [lw.value(op.input(0)), lw.value(op.input(1))]
    lw.define(op, lw.emit("Gather", inputs, {"axis": axis}))


def gather_nd(lw: Lowering, op: Op) -> None:
    indices = _cast(lw, lw.value(op.input(1)), np.int64)
    lw.define(op, lw.emit("GatherND", [lw.value(op.input(0)), indices]))


def one_hot(lw: Lowering, op: Op) -> None:
    """OneHot: ai.onnx takes the off and on values as one two-element tensor."""
    axis = lw.ints([0], "axis")
    off, on = (lw.emit("Unsqueeze", [lw.value(op.input(position)), axis]) for position in (3, 2))
    inputs = [lw.value(op.input(0)), lw.value(op.input(1)), lw.emit("Concat", [off, on], {"axis": 0})]
    lw.define(op, lw.emit("OneHot", inputs, {"axis": op.attr("axis", -1)}))


def tile(lw: Lowering, op: Op) -> None:
    lw.define(op, lw.emit("Tile", [lw.value(op.input(0)), _int64(lw, op.input(1), "multiples")]))


def fill(lw: Lowering, op: Op) -> None:
    lw.define(op, lw.emit("Expand", [lw.value(op.input(1)), _int64(lw, op.input(0), "dims")]))


def _arg(op_type: str) -> Lower:
    def arg(lw: Lowering, op: Op) -> None:
        axis = _ints(lw, op.input(1), "axis")[0]
        result = lw.emit(op_type, [lw.value(op.input(0))], {"axis": axis, "keepdims": 0})
        dtype = _dtype(op, "output_type") if "output_type" in op.node.attr else np.dtype(np.int64)
        lw.define(op, result if dtype == np.int64 else _cast(lw, result, dtype))

    return arg


def _resize(mode: str) -> Lower:
    """Image resizing, on the spatial axes of whichever layout the input is held in."""

    def resize(lw: Lowering, op: Op) -> None:
        if op.attr("align_corners", False):
            coordinates, nearest = "align_corners", "round_prefer_ceil"
        elif op.attr("half_pixel_centers", False):  # nearest: floor((out + 0.5) * in / out)
            coordinates, nearest = "half_pixel", "round_prefer_ceil"
        else:
            coordinates, nearest = "asymmetric", "floor"
        attrs: dict[str, Any] = {
            "mode": mode,
            "coordinate_transformation_mode": coordinates,
            "nearest_mode": nearest,
        }
        x = op.input(0)
        layout = NCHW if lw.tensor(x).nchw is not None else TF
        attrs["axes"] = [2, 3] if layout == NCHW else [1, 2]
        inputs = [lw.read(x, layout), "", "", _int64(lw, op.input(1), "sizes")]
        lw.define(op, lw.emit("Resize", inputs, attrs), layout)

    return resize


def _block(op_type: str) -> Lower:
    """DepthToSpace and SpaceToDepth, which ai.onnx defines on NCHW."""

    def block(lw: Lowering, op: Op) -> None:
        fmt, _ = _spatial_axes(op)
        attrs = {"blocksize": op.attr("block_size", 0)} | (
            {"mode": "DCR"} if op_type == "DepthToSpace" else {}
        )
        _define_spatial(lw, op, fmt, lw.emit(op_type, [_spatial_input(lw, op, fmt)], attrs))

    return block


def cumsum(lw: Lowering, op: Op) -> None:
    attrs = {"exclusive": int(op.attr("exclusive", False)), "reverse": int(op.attr("reverse", False))}
    lw.define(op, lw.emit("CumSum", [lw.value(op.input(0)), _int64(lw, op.input(1), "axis")], attrs))


def top_k(lw: Lowering, op: Op) -> None:
    if not op.attr("sorted", True):
        raise NotExpressible("unsorted top-k")
    k = lw.emit("Reshape", [_int64(lw, op.input(1), "k"), lw.ints([1], "one")])
    values, indices = lw.emit_outputs("TopK", [lw.value(op.input(0)), k], 2, {"axis": -1})
    lw.define(op, values)
    index_type = _dtype(op, "index_type") if "index_type" in op.node.attr else np.dtype(np.int32)
    lw.define(op, _cast(lw, indices, index_type), index=1)


def broadcast_to(lw: Lowering, op: Op) -> None:
    lw.define(op, lw.emit("Expand", [lw.value(op.input(0)), _int64(lw, op.input(1), "shape")]))


def _like(fill: float) -> Lower:
    """ZerosLike and OnesLike: a constant of the input's shape and type."""

    def like(lw: Lowering, op: Op) -> None:
        shape = lw.emit("Shape", [lw.value(op.input(0))])
        lw.define(op, lw.emit("Expand", [_scalar(lw, op, fill), shape]))

    return like


def range_(lw: Lowering, op: Op) -> None:
    lw.define(op, lw.emit("Range", [lw.value(op.input(position)) for position in range(3)]))


def _alias(lw: Lowering, op: Op) -> None:
    for index, name in enumerate(op.inputs if op.type == "IdentityN" else op.inputs[:1]):
        lw.alias(op, name, index)


def _nothing(lw: Lowering, op: Op) -> None:
    """Operators with no output: NoOp, and Assert, whose checks a frozen graph does not need."""


def _unary(op_type: str, compute: Callable[[np.ndarray], np.ndarray] | None = None) -> Lower:
    return _elementwise(_onnx(op_type), compute)


def _binary(build: Build, compute: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None) -> Lower:
    return _elementwise(build, compute, arity=2)


LOWERINGS: dict[str, Lower] = {
    "Identity": _alias,
    "IdentityN": _alias,
    "StopGradient": _alias,
    "PreventGradient": _alias,
    "Snapshot": _alias,
    "EnsureShape": _alias,
    "NoOp": _nothing,
    "Assert": _nothing,
    # elementwise, one input
    "Relu": _unary("Relu"),
    "Relu6": _elementwise(_clip(0.0, 6.0)),
    "Elu": _unary("Elu"),
    "Selu": _unary("Selu"),
    "LeakyRelu": _elementwise(_leaky_relu),
    "Sigmoid": _unary("Sigmoid"),
    "Tanh": _unary("Tanh"),
    "Softplus": _unary("Softplus"),
    "Softsign": _unary("Softsign"),
    "Exp": _unary("Exp", np.exp),
    "Log": _unary("Log", np.log),
    "Log1p": _elementwise(_log1p, np.log1p),
    "Sqrt": _unary("Sqrt", np.sqrt),
    "Rsqrt": _elementwise(_rsqrt, lambda x: np.reciprocal(np.sqrt(x))),
    "Square": _elementwise(_square, np.square),
    "Reciprocal": _unary("Reciprocal", np.reciprocal),
    "Inv": _unary("Reciprocal", np.reciprocal),
    "Neg": _unary("Neg", np.negative),
    "Abs": _unary("Abs", np.abs),
    "Sign": _unary("Sign", np.sign),
    "Floor": _unary("Floor", np.floor),
    "Ceil": _unary("Ceil", np.ceil),
    "Round": _unary("Round", np.round),
    "Sin": _unary("Sin", np.sin),
    "Cos": _unary("Cos", np.cos),
    "Erf": _unary("Erf"),
    "Erfc": _elementwise(_erfc),
    "IsNan": _unary("IsNaN"),
    "LogicalNot": _unary("Not", np.logical_not),
    "Cast": cast,
    # elementwise, two inputs, numpy broadcasting
    "Add": _binary(_onnx("Add"), np.add),
    "AddV2": _binary(_onnx("Add"), np.add),
    "BiasAdd": bias_add,
    "Sub": _binary(_onnx("Sub"), np.subtract),
    "Mul": _binary(_onnx("Mul"), np.multiply),
    "RealDiv": _binary(_onnx("Div"), np.divide),
    "Div": _binary(_float_only(_onnx("Div"))),
    "FloorDiv": _binary(_float_only(_floor_div)),
    "Maximum": _binary(_onnx("Max"), np.maximum),
    "Minimum": _binary(_onnx("Min"), np.minimum),
    "Pow": _binary(_onnx("Pow"), np.power),
    "SquaredDifference": _binary(_squared_difference, lambda a, b: np.square(a - b)),
    "Less": _binary(_onnx("Less")),
    "LessEqual": _binary(_onnx("LessOrEqual")),
    "Greater": _binary(_onnx("Greater")),
    "GreaterEqual": _binary(_onnx("GreaterOrEqual")),
    "Equal": _binary(_onnx("Equal")),
    "NotEqual": _binary(_not_equal),
    "LogicalAnd": _binary(_onnx("And")),
    "LogicalOr": _binary(_onnx("Or")),
    "AddN": _elementwise(_onnx("Sum"), arity=0),
    "SelectV2": _elementwise(_onnx("Where"), arity=3),
    "ClipByValue": _elementwise(_clip_by_value, arity=3),
    # spatial
    "Conv2D": conv2d,
    "Conv2DBackpropInput": conv2d_transpose,
    "DepthwiseConv2dNative": depthwise_conv2d,
    "MaxPool": _pool("MaxPool"),
    "AvgPool": _pool("AveragePool"),
    "FusedBatchNorm": fused_batch_norm,
    "FusedBatchNormV2": fused_batch_norm,
    "FusedBatchNormV3": fused_batch_norm,
    "Pad": _pad("constant"),
    "PadV2": _pad("constant"),
    "MirrorPad": _pad("reflect"),
    # reductions and normalisation
    "Mean": _reduce("ReduceMean", np.mean),
    "Sum": _reduce("ReduceSum", np.sum),
    "Max": _reduce("ReduceMax", np.max),
    "Min": _reduce("ReduceMin", np.min),
    "Prod": _reduce("ReduceProd", np.prod),
    "ArgMax": _arg("ArgMax"),
    "ArgMin": _arg("ArgMin"),
    "Softmax": _softmax("Softmax"),
    "LogSoftmax": _softmax("LogSoftmax"),
    # matrices
    "MatMul": matmul,
    "BatchMatMul": batch_matmul,
    "BatchMatMulV2": batch_matmul,
    "BatchMatMulV3": batch_matmul,
    "Einsum": einsum,
    # shapes and indexing
    "Reshape": reshape,
    "Transpose": transpose,
    "ExpandDims": expand_dims,
    "Squeeze": squeeze,
    "Shape": shape,
    "StridedSlice": strided_slice,
    "Slice": slice_,
    "ConcatV2": concat,
    "Pack": pack,
    "Unpack": unpack,
    "Split": split,
    "SplitV": split_v,
    "GatherV2": gather,
    "GatherNd": gather_nd,
    "OneHot": one_hot,
    "Tile": tile,
    "Fill": fill,
    "Range": range_,
    "ResizeBilinear": _resize("linear"),
    "ResizeNearestNeighbor": _resize("nearest"),
    "DepthToSpace": _block("DepthToSpace"),
    "SpaceToDepth": _block("SpaceToDepth"),
    "Cumsum": cumsum,
    "TopKV2": top_k,
    "BroadcastTo": broadcast_to,
    "ZerosLike": _like(0.0),
    "OnesLike": _like(1.0),
}


def lower_operator(lw: Lowering, op: Op, outputs: int) -> None:
    """Lower one operator, or keep it as a ``tensorflow``-domain node when it has no lowering."""
    lowering = LOWERINGS.get(op.type)
    mark = lw.start(op)
    if lowering is not None:
        try:
            lowering(lw, op)
            return
        except NotExpressible:
            lw.rollback(mark)
        except (ValueError, TypeError, IndexError) as error:  # numpy on shapes and attributes that lie
            raise ModelLoadError(f"{op.where} cannot be lowered: {type(error).__name__}: {error}") from error
    lw.keep(op, outputs)
