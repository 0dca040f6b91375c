"""Lowering a Core ML ML program (a MIL ``Program``) to the IR.

The program's entry function (``main``, or the description's default) is lowered from the block
of its opset. ``const`` operations become initializers, or attribute values where an operation
needs them at load (axes, strides, paddings). Operations with no lowering, control flow
included, or with inputs a lowering cannot express (for example computed axes), become nodes of
the ``coreml.mil`` domain, which sessions refuse by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from spawnml import Limits, ModelLoadError
from spawnml.dtypes import STRING
from spawnml.ir import Graph, Value

from .blobs import BlobFiles
from .builder import CoreMLBuilder, NotExpressible, window
from .milvalues import Shape, tensor_type, value_array

DOMAIN = "coreml.mil"


class ProgramLowering:
    """The graph under construction: MIL names mapped to IR names, constants and types."""

    def __init__(self, blobs: BlobFiles, limits: Limits, described: str) -> None:
        self.b = CoreMLBuilder("main", DOMAIN, limits, described)
        self.blobs = blobs
        self.names: dict[str, str] = {}
        self.constants: dict[str, np.ndarray] = {}
        self.types: dict[str, tuple[np.dtype, Shape | None]] = {}

    def define(self, name: str, value_type: Any, where: str) -> None:
        if name in self.types:
            raise ModelLoadError(f"{where} defines {name!r}, which is already defined")
        self.b.limits.check("string length", len(name), self.b.limits.max_string_length, where)
        self.types[name] = tensor_type(value_type, self.b.limits, where)

    def ir_name(self, name: str, where: str) -> str:
        """The IR value of MIL name ``name`` (an initializer for constants, made on first use)."""
        if name not in self.names:
            if name not in self.constants:
                raise ModelLoadError(f"{where} reads {name!r}, which nothing before it defines")
            self.names[name] = self.b.initializer(numeric(self.constants[name], name, where), name)
        return self.names[name]

    def lower(self, operation: Any, index: int) -> None:
        where = f"operation {index} ({operation.type}) of {self.b.described}"
        for output in operation.outputs:
            self.define(output.name, output.type, where)
        if operation.type == "const":
            self._const(operation, where)
            return
        op = Op(self, operation, where)
        lowering = OPERATIONS.get(operation.type)
        mark = self.b.checkpoint()
        try:
            if lowering is None or len(operation.outputs) != 1 or len(operation.blocks):
                raise NotExpressible(operation.type)
            self.names[operation.outputs[0].name] = self.b.name_result(
                lowering(op), operation.outputs[0].name
            )
        except (ValueError, TypeError) as error:  # arguments of the wrong kind, size or type
            raise ModelLoadError(f"{where} has invalid arguments: {error}") from error
        except NotExpressible:
            self.b.rollback(mark)
            outputs = [self.b.fresh(output.name) for output in operation.outputs]
            self.b.keep(operation.type, op.tensor_inputs(), outputs)
            self.names.update(zip((output.name for output in operation.outputs), outputs, strict=True))

    def _const(self, operation: Any, where: str) -> None:
        if len(operation.outputs) != 1 or "val" not in operation.attributes:
            raise ModelLoadError(f"{where} is a const without one output and a value")
        self.constants[operation.outputs[0].name] = value_array(
            operation.attributes["val"], self.blobs, self.b.limits, where
        )


class Op:
    """One operation being lowered: its named arguments, constant or not."""

    def __init__(self, program: ProgramLowering, operation: Any, where: str) -> None:
        self.program, self.operation, self.where = program, operation, where
        self.b = program.b

    def _binding(self, key: str) -> Any:
        if not self.has(key):
            raise ModelLoadError(f"{self.where} has no argument {key!r}")
        arguments = self.operation.inputs[key].arguments
        if len(arguments) != 1:
            raise NotExpressible(f"argument {key!r} with {len(arguments)} bindings")
        return arguments[0]

    def has(self, key: str) -> bool:
        return key in self.operation.inputs

    def const(self, key: str, default: Any = None) -> Any:
        """The constant value of argument ``key`` (``default`` when absent): an array or a string."""
        if not self.has(key):
            return default
        binding = self._binding(key)
        if binding.WhichOneof("binding") == "value":
            value = value_array(binding.value, self.program.blobs, self.b.limits, f"{key!r} of {self.where}")
        elif binding.name in self.program.constants:
            value = self.program.constants[binding.name]
        else:
            raise NotExpressible(f"argument {key!r} computed at run time")
        return str(value.reshape(())) if value.dtype == STRING and value.size == 1 else value

    def ints(self, key: str, default: Any = None) -> list[int] | None:
        value = self.const(key, default)
        return None if value is None else [int(item) for item in np.asarray(value).reshape(-1)]

    def number(self, key: str, default: float) -> float:
        return float(np.asarray(self.const(key, default)).reshape(()))

    def tensor(self, key: str) -> str:
        """The IR name of argument ``key`` as a tensor."""
        return self._tensor(key, self._binding(key))

    def tensors(self, key: str) -> list[str]:
        """The IR names of every binding of a variadic argument (``concat``'s values)."""
        if not self.has(key):
            raise ModelLoadError(f"{self.where} has no argument {key!r}")
        return [self._tensor(key, binding) for binding in self.operation.inputs[key].arguments]

    def _tensor(self, key: str, binding: Any) -> str:
        if binding.WhichOneof("binding") == "value":
            value = value_array(binding.value, self.program.blobs, self.b.limits, f"{key!r} of {self.where}")
            return self.b.initializer(numeric(value, key, self.where), key)
        return self.program.ir_name(binding.name, self.where)

    def array(self, key: str) -> np.ndarray:
        """The constant value of argument ``key`` as a numeric array."""
        return numeric(np.asarray(self.const(key)), key, self.where)

    def dtype(self, key: str) -> np.dtype:
        """The element type of argument ``key``."""
        binding = self._binding(key)
        if binding.WhichOneof("binding") == "value" or binding.name in self.program.constants:
            return self.array(key).dtype
        self.program.ir_name(binding.name, self.where)  # refuses names nothing defines
        return self.program.types[binding.name][0]

    def shape(self, key: str) -> Shape | None:
        """The shape of argument ``key`` as far as the program declares it (None: rank unknown)."""
        binding = self._binding(key)
        if binding.WhichOneof("binding") == "value" or binding.name in self.program.constants:
            return self.array(key).shape
        self.program.ir_name(binding.name, self.where)  # refuses names nothing defines
        return self.program.types[binding.name][1]

    def rank(self, key: str) -> int:
        shape = self.shape(key)
        if shape is None:
            raise NotExpressible(f"argument {key!r} of unknown rank")
        return len(shape)

    def tensor_inputs(self) -> list[str]:
        """The arguments computed at run time, as IR names (for nodes kept in the MIL domain)."""
        names = []
        for key in sorted(self.operation.inputs):
            for binding in self.operation.inputs[key].arguments:
                if binding.WhichOneof("binding") == "name" and binding.name not in self.program.constants:
                    names.append(self.program.ir_name(binding.name, self.where))
        return names

    def scalar(self, value: float, what: str) -> str:
        """A scalar initializer of the element type of argument ``x``."""
        return self.b.initializer(np.asarray(value, self.dtype("x")), what)


def numeric(value: np.ndarray, name: str, where: str) -> np.ndarray:
    """``value``, refused when it holds strings where a tensor of numbers is read."""
    if value.dtype == STRING or value.dtype.kind == "U":
        raise ModelLoadError(f"{where} reads the string constant {name!r} as a tensor")
    return value


def lower_program(model: Any, blobs: BlobFiles, limits: Limits, described: str) -> Graph:
    """The IR graph of an ``mlProgram`` model's entry function."""
    program = model.mlProgram
    name = model.description.defaultFunctionName or "main"
    if name not in program.functions:
        raise ModelLoadError(f"{described} has no ML program function {name!r}")
    function = program.functions[name]
    if function.opset not in function.block_specializations:
        raise ModelLoadError(f"{described}: function {name!r} has no block for its opset {function.opset!r}")
    block = function.block_specializations[function.opset]
    limits.check("node count", len(block.operations), limits.max_nodes, described)
    lowering = ProgramLowering(blobs, limits, described)
    graph = lowering.b.graph
    graph.name = name
    graph.metadata["coreml_opset"] = function.opset
    for value in function.inputs:
        lowering.define(value.name, value.type, f"input {value.name!r} of {described}")
        lowering.names[value.name] = lowering.b.fresh(value.name)
        graph.inputs.append(Value(lowering.names[value.name], *lowering.types[value.name]))
    for index, operation in enumerate(block.operations):
        lowering.lower(operation, index)
    for output in block.outputs:
        ir_name = lowering.ir_name(output, f"the outputs of {described}")
        if ir_name in graph.initializers or any(given.name == ir_name for given in graph.inputs):
            ir_name = lowering.b.emit("Identity", [ir_name])
        graph.outputs.append(Value(ir_name, *lowering.types[output]))
    return graph


# -- operations --------------------------------------------------------------------------------


def _unary(onnx_op: str) -> Callable[[Op], str]:
    return lambda op: op.b.emit(onnx_op, [op.tensor("x")])


def _binary(onnx_op: str) -> Callable[[Op], str]:
    return lambda op: op.b.emit(onnx_op, [op.tensor("x"), op.tensor("y")])


def _with_epsilon(op: Op, default: float) -> str:
    return op.b.emit("Add", [op.tensor("x"), op.scalar(op.number("epsilon", default), "epsilon")])


def _rsqrt(op: Op) -> str:
    return op.b.emit("Reciprocal", [op.b.emit("Sqrt", [_with_epsilon(op, 1e-12)])])


def _inverse(op: Op) -> str:
    return op.b.emit("Reciprocal", [_with_epsilon(op, 1e-4)])


def _log(op: Op) -> str:
    return op.b.emit("Log", [_with_epsilon(op, 1e-45)])


def _square(op: Op) -> str:
    x = op.tensor("x")
    return op.b.emit("Mul", [x, x])


def _silu(op: Op) -> str:
    x = op.tensor("x")
    return op.b.emit("Mul", [x, op.b.emit("Sigmoid", [x])])


def _gelu(op: Op) -> str:
    mode = op.const("mode", "EXACT")
    x = op.tensor("x")
    if mode == "SIGMOID_APPROXIMATION":
        return op.b.emit("Mul", [x, op.b.emit("Sigmoid", [op.b.emit("Mul", [x, op.scalar(1.702, "k")])])])
    return op.b.emit("Gelu", [x], {"approximate": "tanh" if mode == "TANH_APPROXIMATION" else "none"})


def _alpha(onnx_op: str, default: float) -> Callable[[Op], str]:
    return lambda op: op.b.emit(onnx_op, [op.tensor("x")], {"alpha": op.number("alpha", default)})


def _clip(op: Op) -> str:
    low, high = op.scalar(op.number("alpha", 0), "min"), op.scalar(op.number("beta", 1), "max")
    return op.b.emit("Clip", [op.tensor("x"), low, high])


def _relu6(op: Op) -> str:
    return op.b.emit("Clip", [op.tensor("x"), op.scalar(0, "min"), op.scalar(6, "max")])


def _not_equal(op: Op) -> str:
    return op.b.emit("Not", [op.b.emit("Equal", [op.tensor("x"), op.tensor("y")])])


def _softmax(op: Op) -> str:
    return op.b.emit("Softmax", [op.tensor("x")], {"axis": int(op.number("axis", -1))})


def _linear(op: Op) -> str:
    if _is_constant(op, "weight"):
        matrix = op.b.initializer(np.ascontiguousarray(op.array("weight").T), "weight_t")
    else:
        matrix = op.b.emit("Transpose", [op.tensor("weight")], {"perm": [1, 0]})
    y = op.b.emit("MatMul", [op.tensor("x"), matrix])
    return op.b.emit("Add", [y, op.tensor("bias")]) if op.has("bias") else y


def _is_constant(op: Op, key: str) -> bool:
    try:
        op.const(key)
    except NotExpressible:
        return False
    return True


def _matmul(op: Op) -> str:
    operands = []
    for key, flag in (("x", "transpose_x"), ("y", "transpose_y")):
        name = op.tensor(key)
        if bool(np.asarray(op.const(flag, False))):
            rank = op.rank(key)
            name = op.b.emit("Transpose", [name], {"perm": [*range(rank - 2), rank - 1, rank - 2]})
        operands.append(name)
    return op.b.emit("MatMul", operands)


def _spatial(op: Op, spatial: int) -> dict[str, Any]:
    """Strides, dilations and padding of conv and pooling, as ai.onnx attributes."""
    pad_type = op.const("pad_type", "valid")
    attrs: dict[str, Any] = {"strides": op.ints("strides", [1] * spatial)}
    if pad_type == "custom":
        pad = op.ints("pad", [0] * 2 * spatial) or []
        attrs["pads"] = pad[0::2] + pad[1::2]
    elif pad_type in ("same", "same_lower"):
        attrs["auto_pad"] = "SAME_UPPER" if pad_type == "same" else "SAME_LOWER"
    elif pad_type != "valid":
        raise NotExpressible(f"pad_type {pad_type!r}")
    return attrs


def _conv(op: Op) -> str:
    spatial = op.rank("x") - 2
    attrs = _spatial(op, spatial)
    attrs.update(dilations=op.ints("dilations", [1] * spatial), group=int(op.number("groups", 1)))
    inputs = [op.tensor("x"), op.tensor("weight")] + ([op.tensor("bias")] if op.has("bias") else [])
    return op.b.emit("Conv", inputs, window(attrs, op.where))


def _conv_transpose(op: Op) -> str:
    """ConvTranspose; an ``output_shape`` is kept only where it is the one the padding gives."""
    spatial = op.rank("x") - 2
    if op.const("pad_type", "valid") == "same":
        raise NotExpressible("conv_transpose with same padding")
    attrs = _spatial(op, spatial)
    attrs.update(dilations=op.ints("dilations", [1] * spatial), group=int(op.number("groups", 1)))
    if op.has("output_shape") and (op.ints("output_shape") or [])[2:] != _transposed_size(op, attrs):
        raise NotExpressible("conv_transpose with an output shape other than its padding gives")
    inputs = [op.tensor("x"), op.tensor("weight")] + ([op.tensor("bias")] if op.has("bias") else [])
    return op.b.emit("ConvTranspose", inputs, window(attrs, op.where))


def _transposed_size(op: Op, attrs: dict[str, Any]) -> list[int | None]:
    """The spatial output size of a transposed convolution from its input and kernel sizes."""
    sizes, kernel = (op.shape("x") or ())[2:], (op.shape("weight") or ())[2:]
    pads = attrs.get("pads", [0] * 2 * len(sizes))
    return [
        None
        if size is None or k is None
        else (size - 1) * s + (k - 1) * d + 1 - pads[i] - pads[i + len(sizes)]
        for i, (size, k, s, d) in enumerate(
            zip(sizes, kernel, attrs["strides"], attrs["dilations"], strict=False)
        )
    ]


def _pool(onnx_op: str) -> Callable[[Op], str]:
    def lower(op: Op) -> str:
        kernel = op.ints("kernel_sizes")
        if not kernel:
            raise ModelLoadError(f"{op.where} has no kernel_sizes")
        attrs = _spatial(op, len(kernel))
        attrs.update(kernel_shape=kernel, ceil_mode=int(bool(np.asarray(op.const("ceil_mode", False)))))
        if onnx_op == "AveragePool":
            exclude = bool(np.asarray(op.const("exclude_padding_from_average", False)))
            attrs["count_include_pad"] = 0 if exclude else 1
        return op.b.emit(onnx_op, [op.tensor("x")], window(attrs, op.where))

    return lower


def _layer_norm(op: Op) -> str:
    """LayerNormalization over trailing ``axes``; absent gamma / beta filled where the shape is known."""
    shape = op.shape("x")
    if shape is None:
        raise NotExpressible("layer_norm of unknown rank")
    rank = len(shape)
    axes = sorted(axis % rank for axis in op.ints("axes", list(range(rank))) or [])
    if not axes or axes != list(range(axes[0], rank)):
        raise NotExpressible("layer_norm over axes that are not the last ones")
    normalized = shape[axes[0] :]
    known = tuple(size for size in normalized if size is not None)
    params = []
    for key, fill in (("gamma", np.ones), ("beta", np.zeros)):
        if op.has(key):
            params.append(op.tensor(key))
        elif len(known) != len(normalized):
            raise NotExpressible(f"layer_norm without {key} over dimensions of unknown size")
        else:
            params.append(op.b.initializer(fill(known, op.dtype("x")), key))
    attrs = {"axis": axes[0], "epsilon": op.number("epsilon", 1e-5)}
    return op.b.emit("LayerNormalization", [op.tensor("x"), *params], attrs)


def _batch_norm(op: Op) -> str:
    mean = op.tensor("mean")
    channels = op.array("mean").size if _is_constant(op, "mean") else None
    params = []
    for key, fill in (("gamma", np.ones), ("beta", np.zeros)):
        if op.has(key):
            params.append(op.tensor(key))
        elif channels is None:
            raise NotExpressible(f"batch_norm without {key} and with a computed mean")
        else:
            params.append(op.b.initializer(fill(channels, op.dtype("x")), key))
    inputs = [op.tensor("x"), *params, mean, op.tensor("variance")]
    return op.b.emit("BatchNormalization", inputs, {"epsilon": op.number("epsilon", 1e-5)})


def _reshape(op: Op) -> str:
    if _is_constant(op, "shape"):
        shape = op.b.ints(op.ints("shape"), "shape")
    else:
        shape = op.b.emit("Cast", [op.tensor("shape")], {"to": 7})
    return op.b.emit("Reshape", [op.tensor("x"), shape])


def _transpose(op: Op) -> str:
    return op.b.emit("Transpose", [op.tensor("x")], {"perm": op.ints("perm")})


def _concat(op: Op) -> str:
    if bool(np.asarray(op.const("interleave", False))):
        raise NotExpressible("interleaved concat")
    return op.b.emit("Concat", op.tensors("values"), {"axis": int(op.number("axis", 0))})


def _slice_by_index(op: Op) -> str:
    """``x[begin:end:stride]`` with constant bounds (computed bounds are not expressed)."""
    rank = op.rank("x")
    begin, end = op.ints("begin"), op.ints("end")
    strides = op.ints("stride", [1] * rank)

    def mask(key: str) -> list[bool]:
        return [bool(flag) for flag in op.ints(key, [0] * rank) or []]

    masks = (mask("begin_mask"), mask("end_mask"), mask("squeeze_mask"))
    return op.b.strided_slice(op.tensor("x"), begin or [], end or [], strides or [], masks)


def _slice_by_size(op: Op) -> str:
    """``size`` elements from ``begin`` on each axis (``-1``: to the end), with constant bounds."""
    begin, size = op.ints("begin") or [], op.ints("size") or []
    if len(begin) != len(size):
        raise ModelLoadError(f"{op.where} has {len(begin)} begins but {len(size)} sizes")
    end = [start + count if count != -1 else 2**63 - 1 for start, count in zip(begin, size, strict=True)]
    return op.b.strided_slice(op.tensor("x"), begin, end, [1] * len(begin), ([], [], []))


def _axes_op(onnx_op: str) -> Callable[[Op], str]:
    """Squeeze / Unsqueeze with constant axes (Squeeze without axes removes every 1)."""

    def lower(op: Op) -> str:
        axes = op.ints("axes")
        inputs = [op.tensor("x")] + ([op.b.ints(axes, "axes")] if axes is not None else [])
        return op.b.emit(onnx_op, inputs)

    return lower


def _reduce(onnx_op: str) -> Callable[[Op], str]:
    def lower(op: Op) -> str:
        axes = op.ints("axes")
        inputs = [op.tensor("x")] + ([op.b.ints(axes, "axes")] if axes is not None else [])
        keep = int(bool(np.asarray(op.const("keep_dims", False))))
        return op.b.emit(onnx_op, inputs, {"keepdims": keep})

    return lower


def _select(op: Op) -> str:
    return op.b.emit("Where", [op.tensor("cond"), op.tensor("a"), op.tensor("b")])


def _tile(op: Op) -> str:
    return op.b.emit("Tile", [op.tensor("x"), op.b.ints(op.ints("reps"), "repeats")])


#: MIL ``pad`` modes -> ai.onnx ``Pad`` modes.
PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}


def _pad(op: Op) -> str:
    """``pad`` lists ``[begin, end]`` pairs for the last axes; ``Pad`` wants all begins, then all ends."""
    rank, pads, mode = op.rank("x"), op.ints("pad") or [], op.const("mode", "constant")
    if mode not in PAD_MODES or len(pads) % 2 or len(pads) > 2 * rank:
        raise NotExpressible(f"pad mode {mode!r} with {len(pads)} amounts")
    begins = [0] * (rank - len(pads) // 2) + pads[0::2]
    ends = [0] * (rank - len(pads) // 2) + pads[1::2]
    inputs = [op.tensor("x"), op.b.ints(begins + ends, "pads")]
    if mode == "constant":
        inputs.append(op.scalar(op.number("constant_val", 0), "value"))
    return op.b.emit("Pad", inputs, {"mode": PAD_MODES[mode]})


def _instance_norm(op: Op) -> str:
    shape = op.shape("x")
    channels = None if shape is None or len(shape) < 3 else shape[1]
    params = []
    for key, fill in (("gamma", np.ones), ("beta", np.zeros)):
        if op.has(key):
            params.append(op.tensor(key))
        elif channels is None:
            raise NotExpressible(f"instance_norm without {key} over channels of unknown size")
        else:
            params.append(op.b.initializer(fill(channels, op.dtype("x")), key))
    attrs = {"epsilon": op.number("epsilon", 1e-5)}
    return op.b.emit("InstanceNormalization", [op.tensor("x"), *params], attrs)


def _arg_reduce(onnx_op: str) -> Callable[[Op], str]:
    """``reduce_argmax`` / ``reduce_argmin``: int64 indices cast to the int32 MIL declares."""

    def lower(op: Op) -> str:
        keep = int(bool(np.asarray(op.const("keep_dims", False))))
        attrs = {"axis": int(op.number("axis", -1)), "keepdims": keep}
        return op.b.emit("Cast", [op.b.emit(onnx_op, [op.tensor("x")], attrs)], {"to": 6})

    return lower


def _upsample_nearest(op: Op) -> str:
    """Nearest-neighbour upsampling by the height and width factors (input ``floor(out / scale)``)."""
    scales = [1.0, 1.0, op.number("scale_factor_height", 1), op.number("scale_factor_width", 1)]
    if op.rank("x") != 4:
        raise NotExpressible("upsampling of a tensor not of rank 4")
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    sizes = op.b.initializer(np.asarray(scales, np.float32), "scales")
    return op.b.emit("Resize", [op.tensor("x"), "", sizes], attrs)


#: MIL ``cast`` dtype names -> ONNX element type codes.
CAST_TYPES = {"fp16": 10, "fp32": 1, "fp64": 11, "int32": 6, "int64": 7, "int16": 5, "bool": 9, "uint8": 2}


def _cast(op: Op) -> str:
    dtype = op.const("dtype")
    if dtype not in CAST_TYPES:
        raise NotExpressible(f"cast to {dtype!r}")
    return op.b.emit("Cast", [op.tensor("x")], {"to": CAST_TYPES[dtype]})


OPERATIONS: dict[str, Callable[[Op], str]] = {
    **{
        name: _unary(onnx_op)
        for name, onnx_op in {
            "relu": "Relu",
            "sigmoid": "Sigmoid",
            "tanh": "Tanh",
            "exp": "Exp",
            "sqrt": "Sqrt",
            "abs": "Abs",
            "erf": "Erf",
            "floor": "Floor",
            "ceil": "Ceil",
            "sin": "Sin",
            "cos": "Cos",
            "sign": "Sign",
            "softplus": "Softplus",
            "softsign": "Softsign",
            "logical_not": "Not",
            "identity": "Identity",
        }.items()
    },
    **{
        name: _binary(onnx_op)
        for name, onnx_op in {
            "add": "Add",
            "sub": "Sub",
            "mul": "Mul",
            "real_div": "Div",
            "pow": "Pow",
            "maximum": "Max",
            "minimum": "Min",
            "equal": "Equal",
            "greater": "Greater",
            "greater_equal": "GreaterOrEqual",
            "less": "Less",
            "less_equal": "LessOrEqual",
            "logical_and": "And",
            "logical_or": "Or",
        }.items()
    },
    "not_equal": _not_equal,
    "rsqrt": _rsqrt,
    "inverse": _inverse,
    "log": _log,
    "square": _square,
    "silu": _silu,
    "gelu": _gelu,
    "leaky_relu": _alpha("LeakyRelu", 0.01),
    "elu": _alpha("Elu", 1.0),
    "clip": _clip,
    "relu6": _relu6,
    "softmax": _softmax,
    "linear": _linear,
    "matmul": _matmul,
    "conv": _conv,
    "conv_transpose": _conv_transpose,
    "max_pool": _pool("MaxPool"),
    "avg_pool": _pool("AveragePool"),
    "layer_norm": _layer_norm,
    "batch_norm": _batch_norm,
    "reshape": _reshape,
    "transpose": _transpose,
    "slice_by_index": _slice_by_index,
    "slice_by_size": _slice_by_size,
    "concat": _concat,
    "squeeze": _axes_op("Squeeze"),
    "expand_dims": _axes_op("Unsqueeze"),
    "reduce_mean": _reduce("ReduceMean"),
    "reduce_sum": _reduce("ReduceSum"),
    "reduce_max": _reduce("ReduceMax"),
    "reduce_min": _reduce("ReduceMin"),
    "cast": _cast,
    "select": _select,
    "tile": _tile,
    "pad": _pad,
    "instance_norm": _instance_norm,
    "reduce_argmax": _arg_reduce("ArgMax"),
    "reduce_argmin": _arg_reduce("ArgMin"),
    "upsample_nearest_neighbor": _upsample_nearest,
}
