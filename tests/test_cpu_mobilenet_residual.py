"""MobileNetV2's residual Adds fused into the convolution before them (com.microsoft FusedConv's
Z input, ``activation(Conv(X, W) + B + Z)``) on the CPU, against onnxruntime.

The kernel cases are one FusedConv node with Z run unoptimized, on each path that finishes a
convolution's output: MobileNetV2's projections (1x1 GEMMs, or the register-tiled loop on one
thread), a small 1x1 one on that loop, a tiled im2col 3x3 one, depthwise ones, 1-D ones, with and
without an activation, batches of 1 and 2; onnxruntime runs the same node. The graph cases are
residual blocks run optimized, against onnxruntime on the graph as written, and what the fusion
leaves alone. Tolerances: float32 within rtol / atol 1e-4 (sums of up to 960 products in another
order); float64 within 1e-10 of PyTorch.
"""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
import torch
from onnx import TensorProto, helper, numpy_helper

from tests.unoptimized import run_onnxruntime, run_spawnml

MS = "com.microsoft"
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}

#: MobileNetV2's projections at 224x224 that a residual Add follows: (input channels, output
#: channels, plane size).
PROJECTIONS = [(144, 24, 56), (192, 32, 28), (384, 64, 14), (576, 96, 14), (960, 160, 7)]

#: (input shape, weight shape, attributes): the other paths that finish a convolution's output.
PATHS = {
    "im2col-3x3-tiled": ((2, 24, 20, 33), (16, 24, 3, 3), {"pads": [1, 1, 1, 1]}),
    "im2col-strided-grouped": ((1, 8, 15, 14), (6, 4, 3, 3), {"group": 2, "strides": [2, 2]}),
    "depthwise-3x3": ((2, 32, 14, 14), (32, 1, 3, 3), {"group": 32, "pads": [1, 1, 1, 1]}),
    "depthwise-5x5-dilated": ((1, 6, 13, 11), (6, 1, 5, 5), {"group": 6, "dilations": [2, 2]}),
    "1d-small": ((2, 8, 50), (12, 8, 3), {"pads": [1, 1]}),
    "1d-lifted": ((1, 64, 3000), (32, 64, 5), {"pads": [2, 2]}),
    "pointwise-grouped": ((2, 12, 9, 9), (6, 4, 1, 1), {"group": 3}),
    "pointwise-tiles": ((2, 20, 9, 10), (13, 20, 1, 1), {}),  # float32: the register-tiled loop
}

ACTIVATIONS = [({}, "none"), ({"activation": "Clip", "activation_params": [0.0, 6.0]}, "clip")]
ACTIVATIONS += [({"activation": "Relu"}, "relu"), ({"activation": "Sigmoid"}, "sigmoid")]


def _fused_conv_model(x_shape, w_shape, attrs: dict, elem: int = TensorProto.FLOAT) -> bytes:
    node = helper.make_node("FusedConv", ["x", "w", "b", "z"], ["y"], domain=MS, **attrs)
    graph = helper.make_graph(
        [node],
        "residual",
        [helper.make_tensor_value_info(name, elem, None) for name in ("x", "w", "b", "z")],
        [helper.make_tensor_value_info("y", elem, None)],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()


def _torch_output_shape(x_shape, w_shape, attrs: dict) -> tuple[int, ...]:
    x = torch.zeros(x_shape[:2] + tuple(max(size, 1) for size in x_shape[2:]))
    return tuple(_torch_conv(x, torch.zeros(w_shape), None, attrs).shape)


def _torch_conv(x, w, b, attrs: dict):
    """PyTorch's convolution of ``x`` with ONNX Conv ``attrs`` (pads given per side)."""
    spatial = x.dim() - 2
    pads = attrs.get("pads", [0] * 2 * spatial)
    widths = [width for axis in reversed(range(spatial)) for width in (pads[axis], pads[axis + spatial])]
    conv = torch.nn.functional.conv1d if spatial == 1 else torch.nn.functional.conv2d
    return conv(
        torch.nn.functional.pad(x, widths),
        w,
        b,
        stride=attrs.get("strides", 1),
        dilation=attrs.get("dilations", 1),
        groups=attrs.get("group", 1),
    )


def _feeds(x_shape, w_shape, attrs: dict, dtype, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal(x_shape).astype(dtype),
        "w": (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(dtype),
        "b": rng.standard_normal(w_shape[0]).astype(dtype),
        "z": rng.standard_normal(_torch_output_shape(x_shape, w_shape, attrs)).astype(dtype),
    }


# The kernel ------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize(("inputs", "outputs", "size"), PROJECTIONS)
def test_mobilenet_projections_with_their_residual_match_onnxruntime(inputs, outputs, size, batch):
    x_shape, w_shape = (batch, inputs, size, size), (outputs, inputs, 1, 1)
    model = _fused_conv_model(x_shape, w_shape, {})
    feeds = _feeds(x_shape, w_shape, {}, np.float32, seed=inputs + batch)
    ours = run_spawnml(model, feeds)
    assert ours.shape == (batch, outputs, size, size) and ours.flags.c_contiguous
    np.testing.assert_allclose(ours, run_onnxruntime(model, feeds), **TOLERANCE)


@pytest.mark.parametrize(("activation", "label"), ACTIVATIONS, ids=[label for _, label in ACTIVATIONS])
@pytest.mark.parametrize("name", sorted(PATHS))
def test_residual_on_every_path_matches_onnxruntime(name, activation, label):
    """Z is added before the activation, as onnxruntime's FusedConv does."""
    x_shape, w_shape, attrs = PATHS[name]
    model = _fused_conv_model(x_shape, w_shape, {**attrs, **activation})
    feeds = _feeds(x_shape, w_shape, attrs, np.float32, seed=len(name))
    feeds["z"] *= 4  # so that the clamps cut some of the sums the residual moved
    np.testing.assert_allclose(run_spawnml(model, feeds), run_onnxruntime(model, feeds), **TOLERANCE)


#: Convolutions large enough to use two threads, one per path: spans of output rows (each part adds
#: its own span of the residual), a 1x1 product on BLAS's threads, spans of channels.
SPLIT_PATHS = {
    "im2col-3x3": ((2, 32, 64, 60), (32, 32, 3, 3), {"pads": [1, 1, 1, 1]}),
    "pointwise": ((1, 192, 56, 56), (96, 192, 1, 1), {}),
    "depthwise-3x3": ((1, 32, 200, 200), (32, 1, 3, 3), {"group": 32, "pads": [1, 1, 1, 1]}),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(SPLIT_PATHS))
def test_residual_on_two_threads_matches_onnxruntime(name, threads):
    x_shape, w_shape, attrs = SPLIT_PATHS[name]
    model = _fused_conv_model(x_shape, w_shape, {**attrs, "activation": "Relu"})
    feeds = _feeds(x_shape, w_shape, attrs, np.float32, seed=3)
    ours = run_spawnml(model, feeds, threads=threads)
    np.testing.assert_allclose(ours, run_onnxruntime(model, feeds), **TOLERANCE)


@pytest.mark.parametrize("name", sorted(PATHS))
def test_float64_residual_matches_pytorch(name):
    """float64, which onnxruntime's FusedConv does not take: Clip(Conv + B + Z, -1, 1) in PyTorch."""
    x_shape, w_shape, attrs = PATHS[name]
    fused = {**attrs, "activation": "Clip", "activation_params": [-1.0, 1.0]}
    model = _fused_conv_model(x_shape, w_shape, fused, TensorProto.DOUBLE)
    feeds = _feeds(x_shape, w_shape, attrs, np.float64, seed=9)
    x, w, b, z = (torch.from_numpy(feeds[key]) for key in "xwbz")
    reference = torch.clamp(_torch_conv(x, w, b, attrs) + z, -1, 1).numpy()
    ours = run_spawnml(model, feeds)
    assert ours.dtype == np.float64
    np.testing.assert_allclose(ours, reference, rtol=1e-10, atol=1e-10)


def test_a_residual_of_another_shape_is_refused():
    x_shape, w_shape = (1, 8, 6, 6), (4, 8, 1, 1)
    feeds = _feeds(x_shape, w_shape, {}, np.float32, seed=1)
    feeds["z"] = feeds["z"][:, :, :1]
    with pytest.raises(spawnml.InvalidArgumentError, match=r"Z\) has shape"):
        run_spawnml(_fused_conv_model(x_shape, w_shape, {}), feeds)


# The fusion ------------------------------------------------------------------------------------


def _weight(rng, name: str, *shape: int) -> object:
    scale = 1 / np.sqrt(np.prod(shape[1:])) if len(shape) > 1 else 1
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _block_model(tail: list, stride: int = 1, output: str = "y") -> bytes:
    """A MobileNetV2 inverted residual block on an input of unknown height and width: 1x1
    expansion, Relu6, 3x3 depthwise of ``stride``, Relu6, 1x1 projection, then ``tail``."""
    rng = np.random.default_rng(11)
    relu6 = ["zero", "six"]
    nodes = [
        helper.make_node("Conv", ["x", "we", "be"], ["e"]),
        helper.make_node("Clip", ["e", *relu6], ["e6"]),
        helper.make_node("Conv", ["e6", "wd", "bd"], ["d"], group=48, pads=[1] * 4, strides=[stride] * 2),
        helper.make_node("Clip", ["d", *relu6], ["d6"]),
        helper.make_node("Conv", ["d6", "wp", "bp"], ["p"]),
        *tail,
    ]
    inits = [_weight(rng, "we", 48, 8, 1, 1), _weight(rng, "be", 48), _weight(rng, "wd", 48, 1, 3, 3)]
    inits += [_weight(rng, "bd", 48), _weight(rng, "wp", 8, 48, 1, 1), _weight(rng, "bp", 8)]
    inits += [numpy_helper.from_array(np.float32(value), name) for name, value in (("zero", 0), ("six", 6))]
    graph = helper.make_graph(
        nodes,
        "block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, "height", "width"])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _optimized(model: bytes) -> list[tuple[str, int, str]]:
    """(op_type, inputs, activation) of each node of the optimized graph on the CPU."""
    options = spawnml.SessionOptions(graph_optimization_level="extended")
    graph = spawnml.InferenceSession(model, options, providers=["cpu"]).graph
    return [(node.op_type, len(node.inputs), node.attrs.get("activation", "")) for node in graph.nodes]


def _check_results(model: bytes, x_shape=(2, 8, 9, 11)) -> None:
    feeds = {"x": np.random.default_rng(5).standard_normal(x_shape).astype(np.float32)}
    ours = run_spawnml(model, feeds, level="all")
    np.testing.assert_allclose(ours, run_onnxruntime(model, feeds), **TOLERANCE)


def test_residual_add_of_a_block_of_unknown_size_is_fused():
    """The block keeps its input's height and width, which shape inference leaves unknown."""
    model = _block_model([helper.make_node("Add", ["x", "p"], ["y"])])
    fused = [("FusedConv", 3, "Clip"), ("FusedConv", 3, "Clip"), ("FusedConv", 4, "")]
    assert _optimized(model) == fused
    _check_results(model)


def test_an_activation_after_the_residual_add_is_fused_too():
    tail = [helper.make_node("Add", ["p", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    model = _block_model(tail)
    assert _optimized(model)[-1] == ("FusedConv", 4, "Relu")
    _check_results(model)


#: The input of a strided block, pooled to the block's output size.
STRIDED_RESIDUAL = [
    helper.make_node("AveragePool", ["x"], ["q"], kernel_shape=[1, 1], strides=[2, 2]),
    helper.make_node("Add", ["p", "q"], ["y"]),
]


@pytest.mark.parametrize(
    ("tail", "stride"),
    [
        # the activation comes before the Add: FusedConv's order cannot express it
        ([helper.make_node("Relu", ["p"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])], 1),
        # a strided block: its height and width are a strided pooling's, not for certain
        (STRIDED_RESIDUAL, 2),
        # the projection is read twice
        ([helper.make_node("Add", ["p", "x"], ["s"]), helper.make_node("Mul", ["s", "p"], ["y"])], 1),
        # a residual that broadcasts: not of the convolution's shape
        ([helper.make_node("ReduceMean", ["x"], ["m"]), helper.make_node("Add", ["p", "m"], ["y"])], 1),
    ],
    ids=["activation-first", "strided", "read-twice", "broadcast"],
)
def test_adds_that_are_no_residual_of_the_conv_stay(tail, stride):
    model = _block_model(tail, stride)
    assert "Add" in [op for op, _, _ in _optimized(model)]
    assert all(inputs == 3 for op, inputs, _ in _optimized(model) if op == "FusedConv")
    _check_results(model, (1, 8, 10, 10) if stride == 1 else (1, 8, 9, 9))


def test_a_residual_that_broadcasts_over_the_channels_stays():
    """A one-channel convolution of the input keeps its height and width, but the Add broadcasts it."""
    weights = np.random.default_rng(2).standard_normal((1, 8, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])],
        "broadcast",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, "height", "width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weights, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    assert [op for op, _, _ in _optimized(model)] == ["Conv", "Add"]
    _check_results(model)
