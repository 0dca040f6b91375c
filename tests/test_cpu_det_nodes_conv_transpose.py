"""ConvTranspose on the CPU against onnxruntime: kernels equal to their strides (the taps tile the
output, as in PP-OCRv4 det's 2x2 stride-2 upsampling), and BatchNormalization, Mul and Add folded
into a ConvTranspose's weights.

float32 results agree within ``rtol=1e-4, atol=1e-5`` (a different summation order), as do
float64 ones with onnx's reference evaluator, float16 ones within ``2e-3`` (the reference
accumulates in float16), folded graphs within ``1e-5``.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from spawnml.session import SessionOptions
from spawnml_cpu.kernels.conv_transpose import taps_tile

from tests.ops.conftest import assert_close, make_model, run_both

PRODUCT = {"rtol": 1e-4, "atol": 1e-5}
HALF = {"rtol": 2e-3, "atol": 2e-3}
FOLDED = {"rtol": 1e-5, "atol": 1e-5}

rng = np.random.default_rng(11)


def randn(*shape: int, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


TILING_CASES = [
    ((1, 6, 5, 7), (6, 4, 2, 2), {"strides": [2, 2]}),
    ((2, 4, 3, 5), (4, 3, 2, 2), {"strides": [2, 2], "group": 2}),
    ((1, 3, 4, 5), (3, 2, 3, 2), {"strides": [3, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 4, 5), (3, 2, 1, 1), {}),
    ((2, 3, 7), (3, 5, 4), {"strides": [4]}),
    ((1, 8, 300, 40), (8, 24, 2, 2), {"strides": [2, 2]}),  # several row tiles, the last one short
]


@pytest.mark.parametrize("x_shape, w_shape, attrs", TILING_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose_whose_taps_tile_the_output(x_shape, w_shape, attrs, bias):
    assert taps_tile(attrs, x_shape[2:], w_shape[2:])
    channels = w_shape[1] * attrs.get("group", 1)
    feeds = {"x": randn(*x_shape)}
    weights = {"w": randn(*w_shape), **({"b": randn(channels)} if bias else {})}
    ours, reference = run_both(make_model("ConvTranspose", feeds, initializers=weights, **attrs), feeds)
    assert_close(ours, reference, **PRODUCT)
    assert ours[0].flags.c_contiguous


@pytest.mark.parametrize("dtype, tolerance", [(np.float64, PRODUCT), (np.float16, HALF)])
def test_conv_transpose_tiling_in_other_float_types(dtype, tolerance):
    """Against onnx's reference evaluator: onnxruntime's CPU ConvTranspose is float32 only."""
    feeds = {"x": randn(2, 4, 6, 5, dtype=dtype)}
    weights = {"w": randn(4, 3, 2, 2, dtype=dtype), "b": randn(3, dtype=dtype)}
    model = make_model("ConvTranspose", feeds, initializers=weights, strides=[2, 2])
    ours = spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
    assert_close(ours, ReferenceEvaluator(model).run(None, feeds), **tolerance)


@pytest.mark.parametrize(
    "attrs",
    [
        {"strides": [2, 2], "pads": [1, 0, 0, 1]},
        {"strides": [2, 2], "output_padding": [1, 1]},
        {"strides": [2, 2], "dilations": [2, 1]},
        {"strides": [1, 2]},
    ],
)
def test_conv_transpose_where_taps_do_not_tile(attrs):
    assert not taps_tile(attrs, (4, 5), (2, 2))
    feeds = {"x": randn(1, 3, 4, 5)}
    weights = {"w": randn(3, 2, 2, 2), "b": randn(2)}
    ours, reference = run_both(make_model("ConvTranspose", feeds, initializers=weights, **attrs), feeds)
    assert_close(ours, reference, **PRODUCT)


def test_empty_batch():
    feeds = {"x": np.zeros((0, 3, 4, 5), np.float32)}
    weights = {"w": randn(3, 2, 2, 2)}
    ours, reference = run_both(
        make_model("ConvTranspose", feeds, initializers=weights, strides=[2, 2]), feeds
    )
    assert_close(ours, reference, **PRODUCT)


# --- folding into ConvTranspose ------------------------------------------------------


def chain_model(group: int, attrs: dict, read_twice: bool = False) -> bytes:
    """ConvTranspose (4 -> 6 channels) -> Add -> BatchNormalization -> Mul -> Relu, per-channel
    constants; ``read_twice`` adds a Neg of the ConvTranspose's output as a second output."""
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w", "b"], ["ct"], group=group, **attrs),
        helper.make_node("Add", ["ct", "shift"], ["add"]),
        helper.make_node("BatchNormalization", ["add", "s", "o", "m", "v"], ["bn"], epsilon=1e-3),
        helper.make_node("Mul", ["bn", "k"], ["mul"]),
        helper.make_node("Relu", ["mul"], ["y"]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if read_twice:
        nodes.append(helper.make_node("Neg", ["ct"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    weights = {
        "w": randn(4, 6 // group, 2, 3),
        "b": randn(6),
        "shift": randn(1, 6, 1, 1),
        "s": randn(6),
        "o": randn(6),
        "m": randn(6),
        "v": rng.uniform(0.2, 2.0, 6).astype(np.float32),
        "k": randn(6, 1, 1),
    }
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
        outputs,
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString()


def optimized(data: bytes) -> spawnml.InferenceSession:
    return spawnml.InferenceSession(data, SessionOptions(graph_optimization_level="extended"))


@pytest.mark.parametrize("group", [1, 2])
@pytest.mark.parametrize(
    "attrs", [{"strides": [2, 3]}, {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 1]}]
)
def test_add_batch_norm_and_mul_fold_into_conv_transpose(group, attrs):
    data = chain_model(group, attrs)
    session = optimized(data)
    assert [node.op_type for node in session.graph.nodes] == ["ConvTranspose", "Relu"]
    feeds = {"x": randn(1, 4, 5, 5)}
    reference = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    assert_close(session.run(None, feeds), reference.run(None, feeds), **FOLDED)


def test_conv_transpose_read_twice_is_not_folded():
    data = chain_model(1, {"strides": [2, 2]}, read_twice=True)
    session = optimized(data)
    assert [node.op_type for node in session.graph.nodes] == [
        "ConvTranspose",
        "Add",
        "BatchNormalization",
        "Mul",
        "Relu",
        "Neg",
    ]
    feeds = {"x": randn(1, 4, 5, 5)}
    reference = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    assert_close(session.run(None, feeds), reference.run(None, feeds), **FOLDED)
