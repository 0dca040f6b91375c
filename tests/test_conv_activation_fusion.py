"""Conv + activation fusion into FusedConv: onnxruntime's activations and SpawnML's own (SiLU
spelled ``Mul(y, Sigmoid(y))``, HardSwish, also spelled ``y * Clip(y + 3, 0, 6) / 6``), with and
without a residual Z, on 1x1, 3x3, depthwise and strided convolutions.

Each graph runs optimized and unoptimized on each provider and in onnxruntime (unfused, as
``ORT_DISABLE_ALL`` leaves it); float32 results agree within ``rtol = atol = 1e-5`` on the CPU
(as the other fusion tests) and ``1e-4`` on the GPU backends. Saving the optimized model gives a
file onnxruntime runs to the same results.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper
from spawnml.ir import Node
from spawnml.session import SessionOptions

from tests.backends import GPU_BACKENDS, backend_or_skip

FLOAT = TensorProto.FLOAT
RNG = np.random.default_rng(23)
TOLERANCE = {"cpu": 1e-5} | dict.fromkeys(GPU_BACKENDS, 1e-4)


def _constants(**values: float) -> list[onnx.NodeProto]:
    """Constant nodes of float32 scalars, by name."""
    return [
        helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, np.float32)))
        for name, value in values.items()
    ]


#: Activation name -> the nodes from ``a`` to ``y``, and the opset they need.
ACTIVATIONS: dict[str, tuple[list[onnx.NodeProto], int]] = {
    "Relu": ([helper.make_node("Relu", ["a"], ["y"])], 17),
    "Sigmoid": ([helper.make_node("Sigmoid", ["a"], ["y"])], 17),
    "Tanh": ([helper.make_node("Tanh", ["a"], ["y"])], 17),
    "LeakyRelu": ([helper.make_node("LeakyRelu", ["a"], ["y"], alpha=0.2)], 17),
    "HardSigmoid": ([helper.make_node("HardSigmoid", ["a"], ["y"], alpha=0.3, beta=0.4)], 17),
    "SiLU": ([helper.make_node("Sigmoid", ["a"], ["s"]), helper.make_node("Mul", ["a", "s"], ["y"])], 17),
    "SiLU, gate first": (
        [helper.make_node("Sigmoid", ["a"], ["s"]), helper.make_node("Mul", ["s", "a"], ["y"])],
        17,
    ),
    "HardSwish": ([helper.make_node("HardSwish", ["a"], ["y"])], 14),
}
#: HardSwish as exporters spell it without the operator, ``y * Clip(y + 3, 0, 6) / 6``: fused on
#: the CPU from opset 14 on (where the file written back may hold the HardSwish operator).
SPELLED_OUT: dict[str, tuple[list[onnx.NodeProto], int]] = {
    "HardSwish spelled out": (
        [
            *_constants(three=3.0, zero=0.0, six=6.0),
            helper.make_node("Add", ["a", "three"], ["p"]),
            helper.make_node("Clip", ["p", "zero", "six"], ["r"]),
            helper.make_node("Mul", ["a", "r"], ["m"]),
            helper.make_node("Div", ["m", "six"], ["y"]),
        ],
        14,
    ),
    "HardSwish spelled out, sixth first": (
        [
            *_constants(three=3.0, zero=0.0, six=6.0, sixth=1 / 6),
            helper.make_node("Add", ["three", "a"], ["p"]),
            helper.make_node("Clip", ["p", "zero", "six"], ["r"]),
            helper.make_node("Mul", ["sixth", "r"], ["h"]),
            helper.make_node("Mul", ["h", "a"], ["y"]),
        ],
        14,
    ),
}
#: Convolution name -> (input channels, output channels, kernel, stride, group).
CONVS = {
    "1x1": (32, 32, 1, 1, 1),
    "3x3": (16, 16, 3, 1, 1),
    "depthwise": (24, 24, 3, 1, 24),
    "strided": (16, 40, 3, 2, 1),
}
SIZE = 20


@pytest.fixture(params=["cpu", *GPU_BACKENDS])
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def conv_model(conv: str, activation: str, residual: bool, opset: int | None = None) -> bytes:
    """``activation(Conv(x) (+ x))``; the residual is the input, so that its shape is the output's."""
    channels, outputs, kernel, stride, group = CONVS[conv]
    weights = RNG.uniform(-0.5, 0.5, (outputs, channels // group, kernel, kernel)).astype(np.float32)
    inits = [
        numpy_helper.from_array(weights, "w"),
        numpy_helper.from_array(RNG.normal(size=outputs).astype(np.float32), "b"),
    ]
    pads = [kernel // 2] * 4
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=pads, strides=[stride] * 2, group=group)]
    nodes.append(
        helper.make_node("Add", ["c", "x"], ["a"]) if residual else helper.make_node("Identity", ["c"], ["a"])
    )
    after, least = (ACTIVATIONS | SPELLED_OUT)[activation]
    opset = opset or least
    out = -(-SIZE // stride)
    graph = helper.make_graph(
        [*nodes, *after],
        "conv",
        [helper.make_tensor_value_info("x", FLOAT, [1, channels, SIZE, SIZE])],
        [helper.make_tensor_value_info("y", FLOAT, [1, outputs, out, out])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def session(data: bytes, provider: str, level: str = "all", **options) -> spawnml.InferenceSession:
    settings = SessionOptions(graph_optimization_level=level, **options)
    return spawnml.InferenceSession(data, settings, providers=[provider])


def ort_unfused(data: bytes) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])


#: Each convolution plain and, where its output has its input's shape (stride 1), with a residual.
SHAPES = [
    (conv, residual) for conv in CONVS for residual in (False, True) if not residual or CONVS[conv][3] == 1
]


@pytest.mark.parametrize(
    ("conv", "residual"), SHAPES, ids=[f"{c}-{'residual' if r else 'plain'}" for c, r in SHAPES]
)
@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_activation_fuses_and_matches_onnxruntime(tmp_path, provider, activation, conv, residual):
    _fuses_and_matches_onnxruntime(tmp_path, provider, activation, conv, residual)


@pytest.mark.parametrize(
    ("conv", "residual"), SHAPES, ids=[f"{c}-{'residual' if r else 'plain'}" for c, r in SHAPES]
)
@pytest.mark.parametrize("activation", list(SPELLED_OUT))
def test_spelled_out_hard_swish_fuses_and_matches_onnxruntime(tmp_path, activation, conv, residual):
    _fuses_and_matches_onnxruntime(tmp_path, "cpu", activation, conv, residual)


@pytest.mark.parametrize("activation", list(SPELLED_OUT))
def test_spelled_out_hard_swish_before_opset_14_stays_unfused(activation):
    """Written back for other runtimes, a fused HardSwish would be the operator, which opset 13 lacks."""
    data = conv_model("3x3", activation, False, opset=13)
    feeds = {"x": RNG.normal(scale=2.0, size=(1, 16, SIZE, SIZE)).astype(np.float32)}
    unfused = session(data, "cpu")
    assert [node.op_type for node in unfused.graph.nodes] == ["Conv", "FusedElementwise"]
    want = ort_unfused(data).run(None, feeds)[0]
    np.testing.assert_allclose(unfused.run(None, feeds)[0], want, rtol=1e-5, atol=1e-5)


def _fuses_and_matches_onnxruntime(
    tmp_path, provider: str, activation: str, conv: str, residual: bool
) -> None:
    data = conv_model(conv, activation, residual)
    channels = CONVS[conv][0]
    feeds = {"x": RNG.normal(scale=2.0, size=(1, channels, SIZE, SIZE)).astype(np.float32)}
    target = tmp_path / "optimized.onnx"
    fused = session(data, provider, optimized_model_filepath=str(target))
    if provider == "cpu" or not residual:  # (the GPU FusedConv takes no Z)
        assert [node.op_type for node in fused.graph.nodes] == ["FusedConv"]
        assert len(fused.graph.nodes[0].inputs) == (4 if residual else 3)
    got = fused.run(None, feeds)[0]
    tolerance = TOLERANCE[provider]
    want = ort_unfused(data).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(
        got, session(data, provider, "disable").run(None, feeds)[0], rtol=tolerance, atol=tolerance
    )
    saved = onnx.load(target)
    onnx.checker.check_model(saved)
    again = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(again, want, rtol=1e-5, atol=1e-5)


def test_silu_written_back_as_standard_nodes(tmp_path):
    target = tmp_path / "optimized.onnx"
    session(conv_model("3x3", "SiLU", True), "cpu", optimized_model_filepath=str(target))
    saved = onnx.load(target)
    assert [(node.domain, node.op_type) for node in saved.graph.node] == [
        ("com.microsoft", "FusedConv"),
        ("", "Sigmoid"),
        ("", "Mul"),
    ]
    assert not any(attr.name.startswith("activation") for attr in saved.graph.node[0].attribute)


def test_silu_of_a_value_read_elsewhere_stays_unfused():
    data = conv_model("3x3", "SiLU", False)
    model = onnx.load_from_string(data)
    model.graph.output.append(helper.make_tensor_value_info("c", FLOAT, [1, 16, SIZE, SIZE]))
    graph = session(model.SerializeToString(), "cpu").graph
    assert [node.op_type for node in graph.nodes] == ["Conv", "FusedElementwise"]


def test_gpu_fused_conv_takes_spawnml_activations_without_parameters():
    from spawnml.gpu.vision import _check_fused_conv

    for activation in ("Swish", "HardSwish"):
        node = Node("FusedConv", ["x", "w", "b"], ["y"], {"activation": activation}, "", "com.microsoft")
        assert _check_fused_conv(node, 1) is None
        node.attrs["activation_params"] = [1.0]
        assert _check_fused_conv(node, 1) is not None


@pytest.mark.parametrize("activation", list(SPELLED_OUT))
def test_spelled_out_hard_swish_of_a_value_read_elsewhere_stays_unfused(activation):
    model = onnx.load_from_string(conv_model("3x3", activation, False))
    model.graph.output.append(helper.make_tensor_value_info("r", FLOAT, [1, 16, SIZE, SIZE]))
    graph = session(model.SerializeToString(), "cpu").graph
    assert "FusedConv" not in [node.op_type for node in graph.nodes]
