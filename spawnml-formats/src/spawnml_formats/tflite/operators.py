"""One lowering per TFLite builtin operator, selected from :data:`LOWERINGS` by name.

Each lowering reads its inputs through :class:`Lowering` (``value`` for real-valued tensors,
``constant`` for shapes and weights) and defines its outputs; anything without a lowering,
or whose inputs a lowering cannot express (for example non-constant paddings), becomes a
``tflite``-domain node named after the builtin.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import flatbuffers
import numpy as np
import tflite
from spawnml import ModelLoadError
from spawnml.dtypes import to_onnx

from . import variables
from .lowering import DOMAIN, Lowering
from .reader import int_vector

_OPTION_CLASSES = {
    code: name for name, code in vars(tflite.BuiltinOptions).items() if not name.startswith("_")
}
_ACTIVATION_NAMES = {
    code: name for name, code in vars(tflite.ActivationFunctionType).items() if not name.startswith("_")
}


def _empty_table() -> bytes:
    builder = flatbuffers.Builder(16)
    builder.StartObject(0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())


_EMPTY = _empty_table()


class NotExpressible(Exception):
    """This operator's inputs or options have no ai.onnx lowering; keep it as a tflite node."""


@dataclass
class Op:
    """One TFLite operator: its builtin name, tensor indices (-1 = omitted) and options table."""

    name: str
    inputs: list[int]
    outputs: list[int]
    operator: tflite.Operator

    def options(self) -> Any:
        """The builtin options object (defaults when the file omits the table)."""
        kind = self.operator.BuiltinOptionsType()
        table = self.operator.BuiltinOptions()
        cls = getattr(tflite, _OPTION_CLASSES.get(kind, ""), None)
        if cls is None:
            return None
        options = cls()
        if table is None:
            options.Init(_EMPTY, flatbuffers.encode.Get(flatbuffers.packer.uoffset, _EMPTY, 0))
        else:
            options.Init(table.Bytes, table.Pos)
        return options

    def typed_options(self, cls: type) -> Any:
        """The options as ``cls``; defaults when absent, refused when the file gives another type."""
        options = self.options()
        if options is None:
            options = cls()
            options.Init(_EMPTY, flatbuffers.encode.Get(flatbuffers.packer.uoffset, _EMPTY, 0))
        if not isinstance(options, cls):
            raise ModelLoadError(f"{self.name} operator has {type(options).__name__}, not {cls.__name__}")
        return options

    @property
    def x(self) -> int:
        return self.inputs[0]

    @property
    def y(self) -> int:
        return self.outputs[0]

    def input(self, position: int) -> int:
        """Input tensor ``position``, -1 when omitted."""
        return self.inputs[position] if position < len(self.inputs) else -1


# -- shared pieces -----------------------------------------------------------------------------


def _clip(low: float, high: float) -> Callable[[Lowering, str], str]:
    def clip(lw: Lowering, name: str) -> str:
        bounds = [lw.initializer(np.array(v, np.float32), f"clip_{v:g}") for v in (low, high)]
        return lw.emit("Clip", [name, *bounds])

    return clip


def _op(op_type: str) -> Callable[[Lowering, str], str]:
    return lambda lw, name: lw.emit(op_type, [name])


#: Fused activation functions by TFLite name. LiteRT's kernels clamp to these ranges and
#: ignore TANH and SIGN_BIT, so operators fused with those stay ``tflite`` nodes.
ACTIVATIONS: dict[str, Callable[[Lowering, str], str]] = {
    "NONE": lambda lw, name: name,
    "RELU": _op("Relu"),
    "RELU6": _clip(0.0, 6.0),
    "RELU_N1_TO_1": _clip(-1.0, 1.0),
}


def _activate(lw: Lowering, op: Op, name: str) -> str:
    options = op.options()
    code = options.FusedActivationFunction() if hasattr(options, "FusedActivationFunction") else 0
    activation = _ACTIVATION_NAMES.get(code, str(code))
    if activation not in ACTIVATIONS:
        raise NotExpressible(f"fused activation {activation}")
    return ACTIVATIONS[activation](lw, name)


def _spatial(options: Any) -> dict[str, Any]:
    padding = "SAME_UPPER" if options.Padding() == tflite.Padding.SAME else "VALID"
    return {"auto_pad": padding, "strides": [options.StrideH(), options.StrideW()]}


def _weights(lw: Lowering, index: int, perm: list[int]) -> str:
    """A weight tensor in ONNX layout: transposed at load when constant, by a node otherwise."""
    value = lw.float_constant(index)
    if value is None:
        return lw.emit("Transpose", [lw.value(index)], {"perm": perm})
    return lw.initializer(value.astype(np.float32).transpose(perm), lw.info(index).name + "_onnx")


def _constant_ints(lw: Lowering, index: int, what: str) -> np.ndarray:
    value = lw.constant(index) if index >= 0 else None
    if value is None:
        raise NotExpressible(f"non-constant {what}")
    return value.astype(np.int64)


# -- lowerings ---------------------------------------------------------------------------------


def conv_2d(lw: Lowering, op: Op) -> None:
    options = op.typed_options(tflite.Conv2DOptions)
    attrs = _spatial(options) | {"dilations": [options.DilationHFactor(), options.DilationWFactor()]}
    _convolution(lw, op, _weights(lw, op.input(1), [0, 3, 1, 2]), attrs)


def depthwise_conv_2d(lw: Lowering, op: Op) -> None:
    options = op.typed_options(tflite.DepthwiseConv2DOptions)
    attrs = _spatial(options) | {"dilations": [options.DilationHFactor(), options.DilationWFactor()]}
    attrs["group"] = lw.info(op.x).shape[-1]
    _convolution(lw, op, _weights(lw, op.input(1), [3, 0, 1, 2]), attrs)


def _convolution(lw: Lowering, op: Op, weights: str, attrs: dict[str, Any]) -> None:
    inputs = [lw.nchw(lw.value(op.x)), weights]
    if op.input(2) >= 0:
        inputs.append(lw.value(op.input(2)))
    lw.define(op.y, lw.nhwc(_activate(lw, op, lw.emit("Conv", inputs, attrs))))


def _pool(op_type: str) -> Callable[[Lowering, Op], None]:
    def pool(lw: Lowering, op: Op) -> None:
        options = op.typed_options(tflite.Pool2DOptions)
        attrs = _spatial(options) | {"kernel_shape": [options.FilterHeight(), options.FilterWidth()]}
        pooled = lw.emit(op_type, [lw.nchw(lw.value(op.x))], attrs)
        lw.define(op.y, lw.nhwc(_activate(lw, op, pooled)))

    return pool


def _binary(op_type: str) -> Callable[[Lowering, Op], None]:
    def binary(lw: Lowering, op: Op) -> None:
        result = lw.emit(op_type, [lw.value(op.x), lw.value(op.input(1))])
        lw.define(op.y, _activate(lw, op, result))

    return binary


def _unary(op_type: str) -> Callable[[Lowering, Op], None]:
    return lambda lw, op: lw.define(op.y, lw.emit(op_type, [lw.value(op.x)]))


def _activation(name: str) -> Callable[[Lowering, Op], None]:
    return lambda lw, op: lw.define(op.y, ACTIVATIONS[name](lw, lw.value(op.x)))


def rsqrt(lw: Lowering, op: Op) -> None:
    lw.define(op.y, lw.emit("Reciprocal", [lw.emit("Sqrt", [lw.value(op.x)])]))


def leaky_relu(lw: Lowering, op: Op) -> None:
    alpha = op.typed_options(tflite.LeakyReluOptions).Alpha()
    lw.define(op.y, lw.emit("LeakyRelu", [lw.value(op.x)], {"alpha": float(alpha)}))


def prelu(lw: Lowering, op: Op) -> None:
    lw.define(op.y, lw.emit("PRelu", [lw.value(op.x), lw.value(op.input(1))]))


def softmax(lw: Lowering, op: Op) -> None:
    beta = op.typed_options(tflite.SoftmaxOptions).Beta()
    x = lw.value(op.x)
    if beta != 1.0:
        x = lw.emit("Mul", [x, lw.initializer(np.array(beta, np.float32), "softmax_beta")])
    lw.define(op.y, lw.emit("Softmax", [x], {"axis": -1}))


def reshape(lw: Lowering, op: Op) -> None:
    if op.input(1) >= 0 and lw.constant(op.input(1)) is None:
        shape = lw.emit("Cast", [lw.raw(op.input(1))], {"to": to_onnx(np.dtype(np.int64))})
    elif op.input(1) >= 0:
        shape = lw.ints(_constant_ints(lw, op.input(1), "shape"), "shape")
    else:
        options = op.typed_options(tflite.ReshapeOptions)
        shape = lw.ints(int_vector(lw.parsed, options.NewShapeAsNumpy(), "reshape dims"), "shape")
    lw.define(op.y, lw.emit("Reshape", [lw.value(op.x), shape]))


def transpose(lw: Lowering, op: Op) -> None:
    perm = [int(p) for p in _constant_ints(lw, op.input(1), "permutation")]
    lw.define(op.y, lw.emit("Transpose", [lw.value(op.x)], {"perm": perm}))


def concatenation(lw: Lowering, op: Op) -> None:
    axis = op.typed_options(tflite.ConcatenationOptions).Axis()
    joined = lw.emit("Concat", [lw.value(index) for index in op.inputs], {"axis": axis})
    lw.define(op.y, _activate(lw, op, joined))


def _pad(mode: str) -> Callable[[Lowering, Op], None]:
    def pad(lw: Lowering, op: Op) -> None:
        if (
            mode == "reflect"
            and op.typed_options(tflite.MirrorPadOptions).Mode() != tflite.MirrorPadMode.REFLECT
        ):
            raise NotExpressible("symmetric mirror padding")
        paddings = _constant_ints(lw, op.input(1), "paddings").reshape(-1, 2)
        inputs = [lw.value(op.x), lw.ints(np.concatenate([paddings[:, 0], paddings[:, 1]]), "pads")]
        if op.input(2) >= 0:
            inputs.append(lw.value(op.input(2)))
        lw.define(op.y, lw.emit("Pad", inputs, {"mode": mode}))

    return pad


def _resize(mode: str) -> Callable[[Lowering, Op], None]:
    def resize(lw: Lowering, op: Op) -> None:
        options = op.options()
        height, width = _constant_ints(lw, op.input(1), "output size")
        batch, _, _, channels = lw.info(op.x).shape
        if options.AlignCorners():
            coordinates, nearest = "align_corners", "round_prefer_ceil"
        elif options.HalfPixelCenters():
            coordinates = "half_pixel" if mode == "linear" else "tf_half_pixel_for_nn"
            nearest = "floor"
        else:
            coordinates, nearest = "asymmetric", "floor"
        sizes = lw.ints([batch, height, width, channels], "sizes")
        attrs = {"mode": mode, "coordinate_transformation_mode": coordinates}
        if mode == "nearest":
            attrs["nearest_mode"] = nearest
        lw.define(op.y, lw.emit("Resize", [lw.value(op.x), "", "", sizes], attrs))

    return resize


def _block(op_type: str, cls: type) -> Callable[[Lowering, Op], None]:
    def block(lw: Lowering, op: Op) -> None:
        attrs = {"blocksize": op.typed_options(cls).BlockSize()}
        if op_type == "DepthToSpace":
            attrs["mode"] = "DCR"
        lw.define(op.y, lw.nhwc(lw.emit(op_type, [lw.nchw(lw.value(op.x))], attrs)))

    return block


def fully_connected(lw: Lowering, op: Op) -> None:
    options = op.typed_options(tflite.FullyConnectedOptions)
    if options.WeightsFormat() != tflite.FullyConnectedOptionsWeightsFormat.DEFAULT:
        raise NotExpressible("shuffled weights")
    weights = lw.value(op.input(1))
    features = lw.info(op.input(1)).shape[-1]
    rows = lw.emit("Reshape", [lw.value(op.x), lw.ints([-1, features], "fc_shape")])
    inputs = [rows, weights] + ([lw.value(op.input(2))] if op.input(2) >= 0 else [])
    result = _activate(lw, op, lw.emit("Gemm", inputs, {"transB": 1}))
    if options.KeepNumDims():
        result = lw.emit("Reshape", [result, lw.ints(list(lw.info(op.y).signature), "fc_out_shape")])
    lw.define(op.y, result)


#: Slice ends that ai.onnx clamps to the first or last element of an axis.
_INT64_MAX, _INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def strided_slice(lw: Lowering, op: Op) -> None:
    options = op.typed_options(tflite.StridedSliceOptions)
    if options.EllipsisMask() or options.NewAxisMask():
        raise NotExpressible("strided slice with an ellipsis or new axes")
    begin, end = (_constant_ints(lw, op.input(i), what) for i, what in ((1, "begin"), (2, "end")))
    steps = _constant_ints(lw, op.input(3), "strides")
    shrunk = []
    for axis, step in enumerate(steps):
        bit = 1 << axis
        if options.Offset():
            end[axis] += begin[axis]
        if options.ShrinkAxisMask() & bit:
            if options.BeginMask() & bit:
                raise NotExpressible("strided slice shrinking an axis it also begins at the edge")
            # begin -1 takes the last element: an end of 0 would take none
            end[axis] = begin[axis] + 1 if begin[axis] != -1 else _INT64_MAX
            shrunk.append(axis)
            continue
        if options.BeginMask() & bit:
            begin[axis] = 0 if step > 0 else _INT64_MAX
        if options.EndMask() & bit:
            end[axis] = _INT64_MAX if step > 0 else _INT64_MIN
    inputs = [lw.value(op.x), lw.ints(begin, "starts"), lw.ints(end, "ends")]
    sliced = lw.emit("Slice", [*inputs, lw.ints(np.arange(steps.size), "axes"), lw.ints(steps, "steps")])
    if shrunk:
        sliced = lw.emit("Squeeze", [sliced, lw.ints(shrunk, "axes")])
    lw.define(op.y, sliced)


def split_v(lw: Lowering, op: Op) -> None:
    sizes = _constant_ints(lw, op.input(1), "split sizes")
    axis = int(_constant_ints(lw, op.input(2), "axis").reshape(-1)[0])
    if np.any(sizes < 0):  # at most one -1: whatever the others leave of the axis
        sizes[sizes < 0] = lw.info(op.x).shape[axis] - sizes[sizes >= 0].sum()
    outputs = [lw.fresh(lw.info(index).name) for index in op.outputs]
    lw.add_node("Split", [lw.value(op.x), lw.ints(sizes, "split")], outputs, {"axis": axis})
    for index, output in zip(op.outputs, outputs, strict=True):
        lw.define(index, output)


def _reduce(op_type: str) -> Callable[[Lowering, Op], None]:
    def reduce(lw: Lowering, op: Op) -> None:
        axes = lw.ints(_constant_ints(lw, op.input(1), "axes").reshape(-1), "axes")
        keep = int(op.typed_options(tflite.ReducerOptions).KeepDims())
        lw.define(op.y, lw.emit(op_type, [lw.value(op.x), axes], {"keepdims": keep}))

    return reduce


def dequantize(lw: Lowering, op: Op) -> None:
    folded = lw.float_constant(op.x)
    if folded is not None:
        lw.fold(op.y, folded.astype(np.float32))
    elif lw.info(op.x).quantized:
        lw.define(op.y, lw.value(op.x))
    else:
        lw.define(op.y, lw.emit("Cast", [lw.value(op.x)], {"to": to_onnx(np.dtype(np.float32))}))


def quantize(lw: Lowering, op: Op) -> None:
    lw.define(op.y, lw.value(op.x))


def densify(lw: Lowering, op: Op) -> None:
    value = lw.constant(op.x)
    if value is None:
        raise ModelLoadError(f"DENSIFY of {lw.where(op.x)}, which is not a constant")
    lw.fold(op.y, value)


LOWERINGS: dict[str, Callable[[Lowering, Op], None]] = {
    "CONV_2D": conv_2d,
    "DEPTHWISE_CONV_2D": depthwise_conv_2d,
    "MAX_POOL_2D": _pool("MaxPool"),
    "AVERAGE_POOL_2D": _pool("AveragePool"),
    "ADD": _binary("Add"),
    "SUB": _binary("Sub"),
    "MUL": _binary("Mul"),
    "DIV": _binary("Div"),
    "MAXIMUM": _binary("Max"),
    "MINIMUM": _binary("Min"),
    "POW": _binary("Pow"),
    "RELU": _activation("RELU"),
    "RELU6": _activation("RELU6"),
    "RELU_N1_TO_1": _activation("RELU_N1_TO_1"),
    "TANH": _unary("Tanh"),
    "LOGISTIC": _unary("Sigmoid"),
    "HARD_SWISH": _unary("HardSwish"),
    "EXP": _unary("Exp"),
    "LOG": _unary("Log"),
    "ABS": _unary("Abs"),
    "NEG": _unary("Neg"),
    "SQRT": _unary("Sqrt"),
    "FLOOR": _unary("Floor"),
    "CEIL": _unary("Ceil"),
    "SIN": _unary("Sin"),
    "COS": _unary("Cos"),
    "RSQRT": rsqrt,
    "LEAKY_RELU": leaky_relu,
    "PRELU": prelu,
    "SOFTMAX": softmax,
    "RESHAPE": reshape,
    "TRANSPOSE": transpose,
    "CONCATENATION": concatenation,
    "PAD": _pad("constant"),
    "PADV2": _pad("constant"),
    "MIRROR_PAD": _pad("reflect"),
    "RESIZE_BILINEAR": _resize("linear"),
    "RESIZE_NEAREST_NEIGHBOR": _resize("nearest"),
    "DEPTH_TO_SPACE": _block("DepthToSpace", tflite.DepthToSpaceOptions),
    "SPACE_TO_DEPTH": _block("SpaceToDepth", tflite.SpaceToDepthOptions),
    "FULLY_CONNECTED": fully_connected,
    "MEAN": _reduce("ReduceMean"),
    "SUM": _reduce("ReduceSum"),
    "REDUCE_MAX": _reduce("ReduceMax"),
    "REDUCE_MIN": _reduce("ReduceMin"),
    "DEQUANTIZE": dequantize,
    "QUANTIZE": quantize,
    "DENSIFY": densify,
    "STRIDED_SLICE": strided_slice,
    "SPLIT_V": split_v,
    "VAR_HANDLE": variables.var_handle,
    "READ_VARIABLE": variables.read_variable,
    "ASSIGN_VARIABLE": variables.assign_variable,
    "CALL_ONCE": variables.call_once,
}
#: Lowerings of operators that write no tensor (the others need an output to define).
WITHOUT_OUTPUTS = {"ASSIGN_VARIABLE", "CALL_ONCE"}


def lower_operator(lw: Lowering, operator: tflite.Operator, name: str) -> None:
    """Lower one operator, or keep it as a ``tflite``-domain node when it has no lowering."""
    count = lw.tensor_count
    inputs = [
        lw.parsed.index("operator input", i, count) if i >= 0 else -1
        for i in _indices(lw, operator.InputsAsNumpy())
    ]
    outputs = [lw.parsed.index("operator output", i, count) for i in _indices(lw, operator.OutputsAsNumpy())]
    op = Op(name, inputs, outputs, operator)
    lowering = LOWERINGS.get(name)
    if lowering is not None and (outputs or name in WITHOUT_OUTPUTS):
        mark = lw.checkpoint()
        try:
            lowering(lw, op)
            return
        except NotExpressible:
            lw.rollback(mark)
    node_inputs = [lw.raw(index) if index >= 0 else "" for index in inputs]
    node_outputs = [lw.fresh(lw.info(index).name) for index in outputs]
    lw.add_node(name, node_inputs, node_outputs, domain=DOMAIN)
    for index, output in zip(outputs, node_outputs, strict=True):
        lw.define_raw(index, output)


def _indices(lw: Lowering, array: Any) -> list[int]:
    return int_vector(lw.parsed, array, "operator tensor indices")
