"""The CPU's 3x3 depthwise loop on MobileNetV2's layers and on the edges of its tiling, against
onnxruntime (float32) and PyTorch (float64, which onnxruntime's CPU Conv does not take).

The loop copies a few channels' zero-padded input planes at a time (as many as fit its tile)
into phases split by stride, and sums each output plane as one run. The cases cover every
depthwise layer shape of MobileNetV2 at 224x224 (planes of 112 down to 7, strides 1 and 2) with
its Relu6 fused as FusedConv does, channel counts that leave a last tile part-full, odd and even
widths under stride-2 column splits, pads of 0 to 3 on either side and channel multipliers.
Each case is one node run unoptimized, so the kernel under test is the one that runs.
Tolerances: float32 within rtol / atol 1e-4 (nine products summed in another order), float64
within 1e-10.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper

from tests.unoptimized import run_onnxruntime, run_spawnml

#: MobileNetV2's depthwise layers at 224x224: (channels, plane size, stride).
MOBILENET_LAYERS = [
    (32, 112, 1),
    (96, 112, 2),
    (144, 56, 1),
    (144, 56, 2),
    (192, 28, 1),
    (192, 28, 2),
    (384, 14, 1),
    (576, 14, 1),
    (576, 14, 2),
    (960, 7, 1),
]

#: (input shape, channel multiplier, strides, pads): the edges of the loop's tiling and copies.
EDGES = {
    "part-full-last-tile": ((1, 37, 9, 9), 1, [1, 1], [1, 1, 1, 1]),
    "stride2-odd-width-left-pad-1": ((1, 5, 12, 13), 1, [2, 2], [1, 1, 1, 1]),
    "stride2-odd-width-no-pads": ((1, 5, 11, 15), 1, [2, 2], [0, 0, 0, 0]),
    "stride2-left-pad-2": ((1, 3, 10, 14), 1, [2, 2], [1, 2, 0, 1]),
    "stride2-left-pad-3-wider-than-the-windows": ((1, 3, 9, 16), 1, [2, 2], [3, 3, 0, 0]),
    "strides-1-2-multiplier": ((2, 6, 13, 17), 2, [1, 2], [0, 1, 2, 1]),
    "strides-3-multiplier-3": ((1, 4, 20, 19), 3, [3, 3], [1, 2, 1, 0]),
    "one-pixel-plane": ((2, 8, 1, 1), 1, [1, 1], [1, 1, 1, 1]),
    "single-row": ((1, 16, 1, 40), 1, [1, 2], [1, 1, 1, 1]),
}


def _model(op: str, x_shape, multiplier: int, attrs: dict, elem: int) -> tuple[bytes, tuple[int, ...]]:
    channels = x_shape[1]
    w_shape = (channels * multiplier, 1, 3, 3)
    domain = "com.microsoft" if op == "FusedConv" else ""
    node = helper.make_node(op, ["x", "w", "b"], ["y"], domain=domain, group=channels, **attrs)
    graph = helper.make_graph(
        [node],
        "depthwise",
        [
            helper.make_tensor_value_info("x", elem, x_shape),
            helper.make_tensor_value_info("w", elem, w_shape),
            helper.make_tensor_value_info("b", elem, [w_shape[0]]),
        ],
        [helper.make_tensor_value_info("y", elem, None)],
    )
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString(), w_shape


def _feeds(x_shape, w_shape, dtype, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal(x_shape).astype(dtype),
        "w": rng.standard_normal(w_shape).astype(dtype),
        "b": rng.standard_normal(w_shape[0]).astype(dtype),
    }


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("channels", "size", "stride"), MOBILENET_LAYERS)
def test_mobilenet_depthwise_layers_match_onnxruntime(channels, size, stride, threads):
    """Each layer with its Relu6 (FusedConv Clip 0..6), batch 2, on one and on two threads."""
    attrs = {"strides": [stride] * 2, "pads": [1] * 4, "activation": "Clip", "activation_params": [0.0, 6.0]}
    x_shape = (2, channels, size, size)
    model, w_shape = _model("FusedConv", x_shape, 1, attrs, TensorProto.FLOAT)
    feeds = _feeds(x_shape, w_shape, np.float32, seed=channels + stride)
    ours = run_spawnml(model, feeds, threads=threads)
    reference = run_onnxruntime(model, feeds)
    assert ours.shape == reference.shape == (2, channels, size // stride, size // stride)
    assert ours.flags.c_contiguous
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(EDGES))
def test_depthwise_edges_match_onnxruntime(name):
    x_shape, multiplier, strides, pads = EDGES[name]
    attrs = {"strides": strides, "pads": pads}
    model, w_shape = _model("Conv", x_shape, multiplier, attrs, TensorProto.FLOAT)
    feeds = _feeds(x_shape, w_shape, np.float32, seed=5)
    np.testing.assert_allclose(run_spawnml(model, feeds), run_onnxruntime(model, feeds), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(EDGES))
def test_float64_depthwise_edges_match_pytorch(name):
    x_shape, multiplier, strides, pads = EDGES[name]
    attrs = {"strides": strides, "pads": pads}
    model, w_shape = _model("Conv", x_shape, multiplier, attrs, TensorProto.DOUBLE)
    feeds = _feeds(x_shape, w_shape, np.float64, seed=6)
    x, w, b = (torch.from_numpy(feeds[key]) for key in ("x", "w", "b"))
    padded = torch.nn.functional.pad(x, [pads[1], pads[3], pads[0], pads[2]])
    reference = torch.nn.functional.conv2d(padded, w, b, stride=strides, groups=x_shape[1]).numpy()
    ours = run_spawnml(model, feeds)
    assert ours.dtype == np.float64
    np.testing.assert_allclose(ours, reference, rtol=1e-10, atol=1e-10)
