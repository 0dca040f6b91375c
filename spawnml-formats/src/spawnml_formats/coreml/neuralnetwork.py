"""Lowering a Core ML neural network (``NeuralNetwork`` layers) to the IR.

Networks written for specification version 4 on map input arrays to tensors of their exact
rank (``EXACT_ARRAY_MAPPING``), as coremltools writes them; the older rank-5 layout is refused.
Convolution, pooling and the channel-wise layers (batchnorm, scale, bias, mvn) work on the last
three axes ``[C, H, W]`` of their input, so their lowerings use negative axes. Layers with no
lowering, or options these lowerings do not express, become nodes of the
``coreml.neuralnetwork`` domain, which sessions refuse by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from spawnml import Limits, ModelLoadError
from spawnml.ir import Graph

from .builder import CoreMLBuilder, NotExpressible, window
from .features import feature_value
from .weights import weight_array

DOMAIN = "coreml.neuralnetwork"
EXACT_ARRAY_MAPPING = 1


class Layer:
    """One layer being lowered: its parameters, IR input names and ranks (None where unknown)."""

    def __init__(self, net: NetworkLowering, layer: Any, kind: str) -> None:
        self.net, self.layer, self.kind = net, layer, kind
        self.params = getattr(layer, kind)
        self.inputs = [net.names[name] for name in layer.input]
        self.ranks = [net.ranks.get(name) for name in layer.input]
        self.where = f"layer {layer.name!r} ({kind}) of {net.b.described}"

    @property
    def x(self) -> str:
        return self.inputs[self._first()]

    @property
    def rank(self) -> int:
        """The first input's rank, for lowerings that depend on it."""
        rank = self.ranks[self._first()]
        if rank is None:
            raise NotExpressible(f"the rank of input {self.layer.input[0]!r} is not known")
        return rank

    def _first(self) -> int:
        if not self.inputs:
            raise ModelLoadError(f"{self.where} has no input")
        return 0

    def array(self, params: Any, shape: tuple[int, ...] | list[int], what: str) -> np.ndarray:
        """The layer's ``params`` weights as a float32 array of ``shape``."""
        return weight_array(params, tuple(shape), self.net.b.limits, f"{what} of {self.where}")

    def weights(self, params: Any, shape: tuple[int, ...] | list[int], what: str) -> str:
        """An initializer of the layer's ``params`` weights."""
        return self.net.b.initializer(self.array(params, shape, what), what)

    def scalar(self, value: float, what: str) -> str:
        return self.net.b.initializer(np.asarray(value, np.float32), what)


class NetworkLowering:
    """The graph under construction and the layer outputs it maps to IR names and ranks."""

    def __init__(self, name: str, limits: Limits, described: str) -> None:
        self.b = CoreMLBuilder(name, DOMAIN, limits, described)
        self.names: dict[str, str] = {}
        self.ranks: dict[str, int | None] = {}

    def lower(self, layer: Any) -> None:
        kind = layer.WhichOneof("layer")
        if kind is None:
            raise ModelLoadError(f"layer {layer.name!r} of {self.b.described} has no layer type")
        missing = [name for name in layer.input if name not in self.names]
        if missing:
            raise ModelLoadError(
                f"layer {layer.name!r} of {self.b.described} reads {missing}, written by none"
            )
        op = Layer(self, layer, kind)
        lowering = LAYERS.get(kind)
        mark = self.b.checkpoint()
        try:
            if lowering is None or len(layer.output) != 1:
                raise NotExpressible(f"no lowering of {kind} layers")
            out, rank = lowering(op)
            outputs = [self.b.name_result(out, layer.output[0])]
            ranks = [rank]
        except (ValueError, TypeError) as error:  # parameters of the wrong kind or size
            raise ModelLoadError(f"{op.where} has invalid parameters: {error}") from error
        except NotExpressible:
            self.b.rollback(mark)
            outputs = [self.b.fresh(name) for name in layer.output]
            self.b.keep(kind, op.inputs, outputs)
            ranks = [None] * len(outputs)
        for name, ir_name, rank in zip(layer.output, outputs, ranks, strict=True):
            self.names[name], self.ranks[name] = ir_name, rank


def lower_network(model: Any, limits: Limits, described: str) -> Graph:
    """The IR graph of a ``neuralNetwork`` (or ``neuralNetworkRegressor``) model."""
    network = getattr(model, model.WhichOneof("Type"))
    if network.arrayInputShapeMapping != EXACT_ARRAY_MAPPING:
        raise ModelLoadError(
            f"{described} maps input arrays to rank-5 tensors (the layout before specification "
            "version 4); SpawnML reads networks with exact array shapes"
        )
    if len(network.preprocessing):
        raise ModelLoadError(f"{described} has image preprocessing, which SpawnML does not read")
    limits.check("node count", len(network.layers), limits.max_nodes, described)
    lowering = NetworkLowering("neuralnetwork", limits, described)
    graph = lowering.b.graph
    for feature in model.description.input:
        value = feature_value(feature, limits, described)
        value.name = lowering.b.fresh(feature.name)
        graph.inputs.append(value)
        lowering.names[feature.name] = value.name
        lowering.ranks[feature.name] = None if value.shape is None else len(value.shape)
    for layer in network.layers:
        limits.check("string length", len(layer.name), limits.max_string_length, described)
        lowering.lower(layer)
    for feature in model.description.output:
        value = feature_value(feature, limits, described)
        if feature.name not in lowering.names:
            raise ModelLoadError(f"{described}: output {feature.name!r} is written by no layer")
        name = lowering.names[feature.name]
        if name in graph.initializers or any(given.name == name for given in graph.inputs):
            name = lowering.b.emit("Identity", [name])
        value.name = name
        graph.outputs.append(value)
    return graph


# -- layers ----------------------------------------------------------------------------------
# Each lowering returns the IR name of its output and the output's rank (None when unknown).

Lowered = tuple[str, int | None]


def _same_rank(op: Layer, name: str) -> Lowered:
    return name, op.ranks[0]


def _convolution(op: Layer) -> Lowered:
    p = op.params
    if p.isDeconvolution and (p.WhichOneof("ConvolutionPaddingType") == "same" or len(op.inputs) != 1):
        raise NotExpressible("deconvolution with same padding or computed weights")
    groups = p.nGroups or 1
    kernel = list(p.kernelSize) or [3, 3]
    attrs: dict[str, Any] = {
        "group": groups,
        "strides": list(p.stride) or [1, 1],
        "dilations": list(p.dilationFactor) or [1, 1],
        "kernel_shape": kernel,
    }
    attrs.update(_padding(p, "ConvolutionPaddingType"))
    if p.isDeconvolution:  # weights [C_in, C_out / groups, kH, kW], as ConvTranspose takes them
        weight = op.weights(p.weights, (p.kernelChannels, p.outputChannels // groups, *kernel), "weight")
        if p.outputShape:
            attrs["output_shape"] = list(p.outputShape)
    elif len(op.inputs) == 2:
        weight = op.inputs[1]
    else:
        weight = op.weights(p.weights, (p.outputChannels, p.kernelChannels, *kernel), "weight")
    inputs = [op.x, weight]
    if p.hasBias:
        inputs.append(op.weights(p.bias, (p.outputChannels,), "bias"))
    kind = "ConvTranspose" if p.isDeconvolution else "Conv"
    return _same_rank(op, op.net.b.emit(kind, inputs, window(attrs, op.where)))


def _padding(p: Any, oneof: str) -> dict[str, Any]:
    """Conv / pool padding attributes of a ``valid`` (explicit amounts) or ``same`` padding."""
    kind = p.WhichOneof(oneof)
    if kind == "same":
        return {"auto_pad": "SAME_LOWER" if p.same.asymmetryMode else "SAME_UPPER"}
    if kind == "valid" and len(p.valid.paddingAmounts.borderAmounts):
        edges = p.valid.paddingAmounts.borderAmounts
        return {"pads": [e.startEdgeSize for e in edges] + [e.endEdgeSize for e in edges]}
    if kind == "includeLastPixel":
        if any(p.includeLastPixel.paddingAmounts):
            raise NotExpressible("includeLastPixel pooling with padding")
        return {"ceil_mode": 1}
    return {}


def _pooling(op: Layer) -> Lowered:
    p = op.params
    kinds = {0: "Max", 1: "Average"}
    if p.type not in kinds:
        raise NotExpressible("L2 pooling")
    kind = kinds[p.type]
    if p.globalPooling:
        return _same_rank(op, op.net.b.emit(f"Global{kind}Pool", [op.x]))
    attrs: dict[str, Any] = {
        "kernel_shape": list(p.kernelSize) or [3, 3],
        "strides": list(p.stride) or [1, 1],
    }
    attrs.update(_padding(p, "PoolingPaddingType"))
    if kind == "Average":
        attrs["count_include_pad"] = 0 if p.avgPoolExcludePadding else 1
    return _same_rank(op, op.net.b.emit(f"{kind}Pool", [op.x], window(attrs, op.where)))


def _inner_product(op: Layer) -> Lowered:
    p = op.params
    if p.int8DynamicQuantize:
        raise NotExpressible("int8 dynamic quantization")
    b = op.net.b
    weight = op.array(p.weights, (p.outputChannels, p.inputChannels), "weight")
    matrix = b.initializer(weight.T, "weight")
    rank = op.rank
    x = op.x
    if rank >= 4:  # [x1, C, 1, 1] or [x1, x2, C, 1, 1]: the last three axes are the features
        x = b.emit("Reshape", [x, b.ints([0] * (rank - 3) + [-1], "shape")])
    y = b.emit("MatMul", [x, matrix])
    if p.hasBias:
        y = b.emit("Add", [y, op.weights(p.bias, (p.outputChannels,), "bias")])
    if rank >= 4:
        y = b.emit("Unsqueeze", [y, b.ints([-2, -1], "axes")])
    return y, rank


def _batched_matmul(op: Layer) -> Lowered:
    p, b = op.params, op.net.b
    if len(op.inputs) == 2:
        a, c = op.inputs
        if p.transposeA:
            a = _swap_last(op, a, op.ranks[0])
        if p.transposeB:
            c = _swap_last(op, c, op.ranks[1])
        known = [rank for rank in op.ranks if rank is not None]
        rank = max([2, *known]) if len(known) == 2 else None
        return b.emit("MatMul", [a, c]), rank
    if p.int8DynamicQuantize:
        raise NotExpressible("int8 dynamic quantization")
    rows, cols = p.weightMatrixFirstDimension, p.weightMatrixSecondDimension
    stored = op.array(p.weights, (cols, rows), "weight")  # [X1, X2] stored column-major
    y = b.emit("MatMul", [op.x, b.initializer(stored.T, "weight")])
    if p.hasBias:
        y = b.emit("Add", [y, op.weights(p.bias, (cols,), "bias")])
    return y, op.ranks[0]


def _swap_last(op: Layer, name: str, rank: int | None) -> str:
    if rank is None:
        raise NotExpressible("a transposed operand of unknown rank")
    perm = [*range(rank - 2), rank - 1, rank - 2]
    return op.net.b.emit("Transpose", [name], {"perm": perm})


def _batchnorm(op: Layer) -> Lowered:
    """Inference batchnorm over axis -3, folded at load into ``x * scale + shift`` of shape ``[C, 1, 1]``."""
    p = op.params
    if p.computeMeanVar and p.instanceNormalization:
        return _instance_norm(op)
    if p.computeMeanVar or p.instanceNormalization:
        raise NotExpressible("batchnorm computing batch statistics")
    gamma, beta, mean, variance = (
        op.array(getattr(p, key), (p.channels,), key) for key in ("gamma", "beta", "mean", "variance")
    )
    shifted = variance + np.float32(p.epsilon or 1e-5)
    if not np.all(shifted > 0):
        raise ModelLoadError(f"{op.where} has variances plus epsilon that are not all positive")
    scale = gamma / np.sqrt(shifted)
    b = op.net.b
    y = b.emit("Mul", [op.x, b.initializer(scale.reshape(-1, 1, 1), "scale")])
    return _same_rank(op, b.emit("Add", [y, b.initializer((beta - mean * scale).reshape(-1, 1, 1), "shift")]))


def _instance_norm(op: Layer) -> Lowered:
    """Instance normalisation (batchnorm computing each instance's statistics) of an NCHW input."""
    p = op.params
    if op.rank != 4:
        raise NotExpressible("instance normalisation of an input not of rank 4")
    scale, bias = (op.weights(getattr(p, key), (p.channels,), key) for key in ("gamma", "beta"))
    attrs = {"epsilon": p.epsilon or 1e-5}
    return _same_rank(op, op.net.b.emit("InstanceNormalization", [op.x, scale, bias], attrs))


def _channel_constant(op: Layer, params: Any, shape: list[int], what: str) -> str:
    """Scale / bias values of shape ``[1]``, ``[C]``, ``[1, H, W]`` or ``[C, H, W]``, as ``[C, H, W]``."""
    values = op.weights(params, shape, what)
    if len(shape) == 1 and shape[0] > 1:
        values = op.net.b.emit("Reshape", [values, op.net.b.ints([-1, 1, 1], "shape")])
    return values


def _scale(op: Layer) -> Lowered:
    p, b = op.params, op.net.b
    y = b.emit("Mul", [op.x, _channel_constant(op, p.scale, list(p.shapeScale) or [1], "scale")])
    if p.hasBias:
        y = b.emit("Add", [y, _channel_constant(op, p.bias, list(p.shapeBias) or [1], "bias")])
    return _same_rank(op, y)


def _bias(op: Layer) -> Lowered:
    bias = _channel_constant(op, op.params.bias, list(op.params.shape) or [1], "bias")
    return _same_rank(op, op.net.b.emit("Add", [op.x, bias]))


def _mvn(op: Layer) -> Lowered:
    p, b = op.params, op.net.b
    axes = b.ints([-3, -2, -1] if p.acrossChannels else [-2, -1], "axes")
    centred = b.emit("Sub", [op.x, b.emit("ReduceMean", [op.x, axes])])
    if not p.normalizeVariance:
        return _same_rank(op, centred)
    variance = b.emit("ReduceMean", [b.emit("Mul", [centred, centred]), axes])
    deviation = b.emit("Sqrt", [b.emit("Add", [variance, op.scalar(p.epsilon or 1e-6, "epsilon")])])
    return _same_rank(op, b.emit("Div", [centred, deviation]))


def _activation(op: Layer) -> Lowered:
    p, b, x = op.params, op.net.b, op.x
    kind = p.WhichOneof("NonlinearityType")
    simple = {
        "ReLU": "Relu",
        "tanh": "Tanh",
        "sigmoid": "Sigmoid",
        "softsign": "Softsign",
        "softplus": "Softplus",
    }
    if kind in simple:
        return _same_rank(op, b.emit(simple[kind], [x]))
    params = getattr(p, kind or "linear")
    if kind == "leakyReLU":
        return _same_rank(op, b.emit("LeakyRelu", [x], {"alpha": params.alpha}))
    if kind == "ELU":
        return _same_rank(op, b.emit("Elu", [x], {"alpha": params.alpha}))
    if kind == "thresholdedReLU":
        return _same_rank(op, b.emit("ThresholdedRelu", [x], {"alpha": params.alpha}))
    if kind == "sigmoidHard":
        return _same_rank(op, b.emit("HardSigmoid", [x], {"alpha": params.alpha, "beta": params.beta}))
    if kind == "linear":
        scaled = b.emit("Mul", [x, op.scalar(params.alpha, "alpha")])
        return _same_rank(op, b.emit("Add", [scaled, op.scalar(params.beta, "beta")]))
    if kind == "scaledTanh":
        inner = b.emit("Tanh", [b.emit("Mul", [x, op.scalar(params.beta, "beta")])])
        return _same_rank(op, b.emit("Mul", [inner, op.scalar(params.alpha, "alpha")]))
    if kind == "PReLU":
        count = len(params.alpha.floatValue) or len(params.alpha.float16Value) // 2 or 1
        slope = op.array(params.alpha, (count,), "alpha")
        return _same_rank(op, b.emit("PRelu", [x, b.initializer(slope.reshape(-1, 1, 1), "slope")]))
    raise NotExpressible(f"{kind} activation")


def _elementwise(onnx_op: str) -> Callable[[Layer], Lowered]:
    """``add`` / ``multiply``: several inputs folded, or one input with the scalar ``alpha``."""

    def lower(op: Layer) -> Lowered:
        b = op.net.b
        if len(op.inputs) == 1:
            return _same_rank(op, b.emit(onnx_op, [op.x, op.scalar(op.params.alpha, "alpha")]))
        y = op.x
        for other in op.inputs[1:]:
            y = b.emit(onnx_op, [y, other])
        return _broadcast_rank(op, y)

    return lower


def _broadcast(onnx_op: str) -> Callable[[Layer], Lowered]:
    """The ``*Broadcastable`` layers: numpy broadcasting, as in ai.onnx."""

    def lower(op: Layer) -> Lowered:
        if len(op.inputs) != 2:
            raise NotExpressible(f"{op.kind} of {len(op.inputs)} inputs")
        return _broadcast_rank(op, op.net.b.emit(onnx_op, op.inputs))

    return lower


def _broadcast_rank(op: Layer, name: str) -> Lowered:
    known = [rank for rank in op.ranks if rank is not None]
    return name, max(known) if len(known) == len(op.ranks) else None


def _softmax(op: Layer) -> Lowered:
    axis = op.params.axis if op.kind == "softmaxND" else -3
    return _same_rank(op, op.net.b.emit("Softmax", [op.x], {"axis": axis}))


def _reshape_static(op: Layer) -> Lowered:
    target = list(op.params.targetShape)
    return op.net.b.emit("Reshape", [op.x, op.net.b.ints(target, "shape")]), len(target)


def _flatten_to_2d(op: Layer) -> Lowered:
    return op.net.b.emit("Flatten", [op.x], {"axis": op.params.axis}), 2


def _transpose(op: Layer) -> Lowered:
    return _same_rank(op, op.net.b.emit("Transpose", [op.x], {"perm": list(op.params.axes)}))


def _concat_nd(op: Layer) -> Lowered:
    if op.params.interleave:
        raise NotExpressible("interleaved concatenation")
    return _same_rank(op, op.net.b.emit("Concat", op.inputs, {"axis": op.params.axis}))


def _concat(op: Layer) -> Lowered:
    if op.params.sequenceConcat:
        raise NotExpressible("sequence concatenation")
    return _same_rank(op, op.net.b.emit("Concat", op.inputs, {"axis": -3}))


def _squeeze(op: Layer) -> Lowered:
    p, b = op.params, op.net.b
    if p.squeezeAll:
        return b.emit("Squeeze", [op.x]), None
    rank = op.ranks[0]
    return b.emit("Squeeze", [op.x, b.ints(list(p.axes), "axes")]), None if rank is None else rank - len(
        p.axes
    )


def _expand_dims(op: Layer) -> Lowered:
    p, b = op.params, op.net.b
    rank = op.ranks[0]
    return b.emit("Unsqueeze", [op.x, b.ints(list(p.axes), "axes")]), None if rank is None else rank + len(
        p.axes
    )


def _load_constant_nd(op: Layer) -> Lowered:
    shape = list(op.params.shape)
    return op.weights(op.params.data, shape, "constant"), len(shape)


def _unary(op: Layer) -> Lowered:
    p, b, x = op.params, op.net.b, op.x
    if p.scale not in (0, 1) or p.shift:
        x = b.emit("Add", [b.emit("Mul", [x, op.scalar(p.scale or 1, "scale")]), op.scalar(p.shift, "shift")])
    names = {0: "SQRT", 1: "RSQRT", 2: "INVERSE", 3: "POWER", 4: "EXP", 5: "LOG", 6: "ABS", 7: "THRESHOLD"}
    kind = names.get(p.type)
    if kind in ("SQRT", "EXP", "LOG", "ABS"):
        return _same_rank(op, b.emit(kind.capitalize(), [x]))
    if kind in ("RSQRT", "INVERSE"):
        shifted = b.emit("Add", [x, op.scalar(p.epsilon or 1e-6, "epsilon")])
        root = b.emit("Sqrt", [shifted]) if kind == "RSQRT" else shifted
        return _same_rank(op, b.emit("Reciprocal", [root]))
    if kind == "POWER":
        return _same_rank(op, b.emit("Pow", [x, op.scalar(p.alpha, "alpha")]))
    if kind == "THRESHOLD":
        return _same_rank(op, b.emit("Max", [x, op.scalar(p.alpha, "alpha")]))
    raise NotExpressible(f"unary function {p.type}")


def _gelu(op: Layer) -> Lowered:
    b, mode = op.net.b, op.params.mode
    if mode == 2:  # SIGMOID_APPROXIMATION: x * sigmoid(1.702 x)
        gate = b.emit("Sigmoid", [b.emit("Mul", [op.x, op.scalar(1.702, "k")])])
        return _same_rank(op, b.emit("Mul", [op.x, gate]))
    return _same_rank(op, b.emit("Gelu", [op.x], {"approximate": "tanh" if mode == 1 else "none"}))


def _reduce(onnx_op: str) -> Callable[[Layer], Lowered]:
    """The ``reduce*`` layers: over ``axes`` (or all), keeping the reduced axes or not."""

    def lower(op: Layer) -> Lowered:
        p, b = op.params, op.net.b
        inputs = [op.x] if p.reduceAll else [op.x, b.ints(list(p.axes), "axes")]
        rank = op.ranks[0]
        if not p.keepDims:
            rank = 0 if p.reduceAll else None if rank is None else rank - len(p.axes)
        return b.emit(onnx_op, inputs, {"keepdims": int(p.keepDims)}), rank

    return lower


def _slice_static(op: Layer) -> Lowered:
    p = op.params
    masks = (list(p.beginMasks), list(p.endMasks), list(p.squeezeMasks))
    y = op.net.b.strided_slice(op.x, list(p.beginIds), list(p.endIds), list(p.strides), masks)
    squeezed = sum(p.squeezeMasks)
    return y, None if op.ranks[0] is None else op.ranks[0] - squeezed


def _slice(op: Layer) -> Lowered:
    """The rank-agnostic ``slice`` layer: one of the last three axes."""
    p, b = op.params, op.net.b
    if p.stride < 1:
        raise ModelLoadError(f"{op.where} has stride {p.stride}")
    axis = {0: -3, 1: -2, 2: -1}.get(p.axis)
    if axis is None:
        raise NotExpressible(f"slice axis {p.axis}")
    inputs = [op.x, b.ints([p.startIndex], "starts"), b.ints([p.endIndex], "ends"), b.ints([axis], "axes")]
    return _same_rank(op, b.emit("Slice", [*inputs, b.ints([p.stride], "steps")]))


def _compare(onnx_op: str) -> Callable[[Layer], Lowered]:
    """Comparisons of two inputs, or of one with ``alpha``, as 0.0 / 1.0 floats (Core ML's truth values)."""

    def lower(op: Layer) -> Lowered:
        b = op.net.b
        other = op.inputs[1] if len(op.inputs) == 2 else op.scalar(op.params.alpha, "alpha")
        truth = b.emit(onnx_op, [op.x, other])
        if onnx_op == "Equal" and op.kind == "notEqual":
            truth = b.emit("Not", [truth])
        return _broadcast_rank(op, b.emit("Cast", [truth], {"to": 1}))

    return lower


def _where(op: Layer) -> Lowered:
    if len(op.inputs) != 3:
        raise ModelLoadError(f"{op.where} has {len(op.inputs)} inputs, not a condition and two values")
    b = op.net.b
    condition = b.emit("Cast", [op.x], {"to": 9})
    return _broadcast_rank(op, b.emit("Where", [condition, *op.inputs[1:]]))


def _tile(op: Layer) -> Lowered:
    reps = list(op.params.reps)
    if len(op.inputs) != 1 or not 1 <= len(reps) <= op.rank:
        raise NotExpressible("tile with computed or more repetitions than axes")
    reps = [1] * (op.rank - len(reps)) + reps
    return _same_rank(op, op.net.b.emit("Tile", [op.x, op.net.b.ints(reps, "repeats")]))


def _pad(op: Layer) -> Lowered:
    """Padding of the last two axes (``[H, W]``), constant, reflected or replicated."""
    p, b = op.params, op.net.b
    edges = p.paddingAmounts.borderAmounts
    if len(edges) != 2 or op.rank < 2:
        raise ModelLoadError(f"{op.where} pads {len(edges)} axes, not height and width")
    lead = [0] * (op.rank - 2)
    pads = lead + [e.startEdgeSize for e in edges] + lead + [e.endEdgeSize for e in edges]
    kind = p.WhichOneof("PaddingType") or "constant"
    inputs = [op.x, b.ints(pads, "pads")]
    if kind == "constant":
        inputs.append(op.scalar(p.constant.value, "value"))
    mode = {"constant": "constant", "reflection": "reflect", "replication": "edge"}[kind]
    return _same_rank(op, b.emit("Pad", inputs, {"mode": mode}))


def _upsample(op: Layer) -> Lowered:
    """Nearest-neighbour upsampling of the last two axes by whole factors."""
    p = op.params
    factors = list(p.scalingFactor) or [1, 1]
    if p.mode != 0 or len(p.fractionalScalingFactor) or len(factors) != 2:
        raise NotExpressible("bilinear or fractional upsampling")
    scales = [1.0] * (op.rank - 2) + [float(factor) for factor in factors]
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    resized = op.net.b.emit(
        "Resize", [op.x, "", op.net.b.initializer(np.asarray(scales, np.float32), "scales")], attrs
    )
    return _same_rank(op, resized)


def _arg_reduce(onnx_op: str) -> Callable[[Layer], Lowered]:
    """``argMax`` / ``argMin``: indices as floats, as Core ML networks hold every tensor."""

    def lower(op: Layer) -> Lowered:
        p, b = op.params, op.net.b
        indices = b.emit(onnx_op, [op.x], {"axis": p.axis, "keepdims": int(not p.removeDim)})
        rank = op.ranks[0]
        return b.emit("Cast", [indices], {"to": 1}), None if rank is None else rank - p.removeDim

    return lower


def _clip(op: Layer) -> Lowered:
    p = op.params
    return _same_rank(
        op, op.net.b.emit("Clip", [op.x, op.scalar(p.minVal, "min"), op.scalar(p.maxVal, "max")])
    )


LAYERS: dict[str, Callable[[Layer], Lowered]] = {
    "convolution": _convolution,
    "pooling": _pooling,
    "innerProduct": _inner_product,
    "batchedMatmul": _batched_matmul,
    "batchnorm": _batchnorm,
    "scale": _scale,
    "bias": _bias,
    "mvn": _mvn,
    "activation": _activation,
    "add": _elementwise("Add"),
    "multiply": _elementwise("Mul"),
    "addBroadcastable": _broadcast("Add"),
    "subtractBroadcastable": _broadcast("Sub"),
    "multiplyBroadcastable": _broadcast("Mul"),
    "divideBroadcastable": _broadcast("Div"),
    "softmax": _softmax,
    "softmaxND": _softmax,
    "reshapeStatic": _reshape_static,
    "flattenTo2D": _flatten_to_2d,
    "transpose": _transpose,
    "concatND": _concat_nd,
    "concat": _concat,
    "squeeze": _squeeze,
    "expandDims": _expand_dims,
    "loadConstantND": _load_constant_nd,
    "unary": _unary,
    "gelu": _gelu,
    "clip": _clip,
    "greaterThan": _compare("Greater"),
    "greaterEqual": _compare("GreaterOrEqual"),
    "lessThan": _compare("Less"),
    "lessEqual": _compare("LessOrEqual"),
    "equal": _compare("Equal"),
    "notEqual": _compare("Equal"),
    "whereBroadcastable": _where,
    "tile": _tile,
    "padding": _pad,
    "upsample": _upsample,
    "argMax": _arg_reduce("ArgMax"),
    "argMin": _arg_reduce("ArgMin"),
    "slice": _slice,
    "sliceStatic": _slice_static,
    **{
        f"reduce{name}": _reduce(f"Reduce{name}")
        for name in ("Mean", "Sum", "Max", "Min", "Prod", "SumSquare", "LogSum", "LogSumExp")
    },
}
