"""Valid Core ML seed files built from the specification's messages: a neural network and an ML program.

Both hold their weights inline (``.mlmodel`` bytes, no package), so every byte a mutation touches is
one the loader reads.
"""

from __future__ import annotations

import numpy as np
from spawnml_formats.coreml.protos import proto

FLOAT32_ARRAY, MIL_FLOAT32, MIL_INT32, MIL_STRING = 65568, 11, 23, 2


def _describe(model, inputs: dict[str, list[int]], outputs: dict[str, list[int]]) -> None:
    for features, shapes in ((model.description.input, inputs), (model.description.output, outputs)):
        for name, shape in shapes.items():
            feature = features.add(name=name)
            feature.type.multiArrayType.shape.extend(shape)
            feature.type.multiArrayType.dataType = FLOAT32_ARRAY


def neural_network_model() -> bytes:
    """``relu(x @ w.T + b)`` reshaped to ``[1, 3, 2, 2]``, batch-normalised, softmax over the last axis."""
    rng = np.random.default_rng(0)
    model = proto("Model_pb2").Model(specificationVersion=4)
    _describe(model, {"x": [2, 4]}, {"y": [1, 3, 2, 2]})
    network = model.neuralNetwork
    network.arrayInputShapeMapping = 1
    dense = network.layers.add(name="dense", input=["x"], output=["h"])
    dense.innerProduct.inputChannels, dense.innerProduct.outputChannels = 4, 6
    dense.innerProduct.hasBias = True
    dense.innerProduct.weights.floatValue.extend(rng.standard_normal(24).astype(np.float32))
    dense.innerProduct.bias.floatValue.extend(rng.standard_normal(6).astype(np.float32))
    relu = network.layers.add(name="relu", input=["h"], output=["r"])
    relu.activation.ReLU.SetInParent()
    shape = network.layers.add(name="shape", input=["r"], output=["s"])
    shape.reshapeStatic.targetShape.extend([1, 3, 2, 2])
    norm = network.layers.add(name="norm", input=["s"], output=["n"])
    norm.batchnorm.channels = 3
    for field, values in (("gamma", 1.5), ("beta", 0.5), ("mean", 0.1), ("variance", 2.0)):
        getattr(norm.batchnorm, field).floatValue.extend([values] * 3)
    softmax = network.layers.add(name="softmax", input=["n"], output=["y"])
    softmax.softmaxND.axis = -1
    return model.SerializeToString()


def _tensor_type(value_type, dtype: int, shape: list[int]) -> None:
    value_type.tensorType.dataType = dtype
    value_type.tensorType.rank = len(shape)
    for size in shape:
        value_type.tensorType.dimensions.add().constant.size = size


def _const(block, name: str, array: np.ndarray) -> None:
    op = block.operations.add(type="const")
    output = op.outputs.add(name=name)
    dtype = MIL_INT32 if array.dtype.kind == "i" else MIL_FLOAT32
    _tensor_type(output.type, dtype, list(array.shape))
    value = op.attributes["val"]
    value.type.CopyFrom(output.type)
    values = value.immediateValue.tensor.ints if dtype == MIL_INT32 else value.immediateValue.tensor.floats
    values.values.extend(array.ravel().tolist())


def _string_const(block, name: str, text: str) -> None:
    op = block.operations.add(type="const")
    output = op.outputs.add(name=name)
    _tensor_type(output.type, MIL_STRING, [])
    value = op.attributes["val"]
    value.type.CopyFrom(output.type)
    value.immediateValue.tensor.strings.values.append(text)


def _operation(block, kind: str, inputs: dict[str, str], output: str, shape: list[int]) -> None:
    op = block.operations.add(type=kind)
    for key, name in inputs.items():
        op.inputs[key].arguments.add(name=name)
    _tensor_type(op.outputs.add(name=output).type, MIL_FLOAT32, shape)


def ml_program_model() -> bytes:
    """``conv -> relu -> max_pool -> reshape -> linear -> softmax`` on ``x: [1, 2, 4, 4]``, inline weights."""
    rng = np.random.default_rng(1)
    model = proto("Model_pb2").Model(specificationVersion=6)
    _describe(model, {"x": [1, 2, 4, 4]}, {"y": [1, 3]})
    function = model.mlProgram.functions["main"]
    model.mlProgram.version = 1
    _tensor_type(function.inputs.add(name="x").type, MIL_FLOAT32, [1, 2, 4, 4])
    function.opset = "CoreML5"
    block = function.block_specializations["CoreML5"]
    _const(block, "w", rng.standard_normal((4, 2, 3, 3)).astype(np.float32))
    _const(block, "b", rng.standard_normal(4).astype(np.float32))
    _const(block, "strides", np.array([1, 1], np.int32))
    _string_const(block, "pad_type", "same")
    _operation(
        block,
        "conv",
        {"x": "x", "weight": "w", "bias": "b", "strides": "strides", "pad_type": "pad_type"},
        "c",
        [1, 4, 4, 4],
    )
    _operation(block, "relu", {"x": "c"}, "r", [1, 4, 4, 4])
    _const(block, "kernel", np.array([2, 2], np.int32))
    _string_const(block, "valid", "valid")
    _operation(
        block,
        "max_pool",
        {"x": "r", "kernel_sizes": "kernel", "strides": "kernel", "pad_type": "valid"},
        "p",
        [1, 4, 2, 2],
    )
    _const(block, "flat", np.array([1, 16], np.int32))
    _operation(block, "reshape", {"x": "p", "shape": "flat"}, "f", [1, 16])
    _const(block, "fc_w", rng.standard_normal((3, 16)).astype(np.float32))
    _const(block, "fc_b", rng.standard_normal(3).astype(np.float32))
    _operation(block, "linear", {"x": "f", "weight": "fc_w", "bias": "fc_b"}, "l", [1, 3])
    _operation(block, "softmax", {"x": "l"}, "y", [1, 3])
    block.outputs.append("y")
    return model.SerializeToString()
