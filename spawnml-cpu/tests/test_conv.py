"""The CPU convolution paths (depthwise, 1x1 on BLAS and on the register-tiled loop, tiled im2col +
GEMM, products by kernel tap, 1-D, N-d) against onnxruntime.

Each case is one Conv (or com.microsoft FusedConv) node run unoptimized, so that the kernel
under test is the one that runs. Tolerances: float32 within rtol 1e-4 / atol 1e-4 (sums of up
to a thousand products in another order), float64 within 1e-10.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import spawnml
from onnx import TensorProto, helper

MS = "com.microsoft"

#: (input shape, weight shape, attributes): each exercises one path or edge of the kernel.
CASES = {
    # stride 1, one pad a side, planes up to _FLAT_PLANE: the flat loop
    "depthwise-3x3": ((1, 32, 28, 28), (32, 1, 3, 3), {"group": 32, "pads": [1, 1, 1, 1]}),
    "depthwise-3x3-flat-narrow-batch": ((2, 6, 7, 9), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),
    "depthwise-3x3-one-column": ((1, 3, 5, 1), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    # stride 1, one pad a side, larger planes: the phases
    "depthwise-3x3-large-plane": ((1, 4, 40, 33), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    "depthwise-stride2-asymmetric-multiplier": (
        (2, 8, 17, 20),
        (16, 1, 3, 3),
        {"group": 8, "strides": [2, 2], "pads": [0, 1, 2, 1]},
    ),
    "depthwise-5x5-dilated": (
        (1, 6, 19, 23),
        (6, 1, 5, 5),
        {"group": 6, "dilations": [2, 2], "pads": [4, 4, 4, 4]},
    ),
    "depthwise-stride3": (
        (1, 4, 16, 16),
        (4, 1, 3, 3),
        {"group": 4, "strides": [3, 3], "pads": [1, 1, 1, 1]},
    ),
    "depthwise-3x3-pads-past-the-kernel": (
        (1, 5, 9, 8),
        (5, 1, 3, 3),
        {"group": 5, "pads": [4, 0, 2, 5]},
    ),
    "depthwise-3x3-stride2-no-pads": ((1, 3, 9, 12), (3, 1, 3, 3), {"group": 3, "strides": [2, 2]}),
    "depthwise-3x3-stride2-pads-2": (
        (1, 3, 10, 11),
        (3, 1, 3, 3),
        {"group": 3, "strides": [2, 2], "pads": [2, 2, 0, 3]},
    ),
    "depthwise-3x3-strides-2-1": (
        (1, 6, 15, 14),
        (6, 1, 3, 3),
        {"group": 6, "strides": [2, 1], "pads": [1, 1, 1, 1]},
    ),
    "depthwise-3x3-strides-1-2-odd": (
        (1, 6, 13, 15),
        (6, 1, 3, 3),
        {"group": 6, "strides": [1, 2], "pads": [0, 1, 0, 1]},
    ),
    "depthwise-3x3-dilated": (
        (1, 4, 12, 12),
        (4, 1, 3, 3),
        {"group": 4, "dilations": [2, 2], "pads": [2, 2, 2, 2]},
    ),
    "dense-3x3-tiled": ((1, 96, 20, 64), (40, 96, 3, 3), {"pads": [1, 1, 1, 1]}),
    # Stride 1, at most _BY_TAP_OUTPUTS outputs: products by kernel tap, in bands of output rows.
    "dense-3x3-by-tap": ((1, 96, 20, 64), (24, 96, 3, 3), {"pads": [1, 1, 1, 1]}),
    "by-tap-bands": ((2, 8, 150, 200), (32, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    "by-tap-5x3-dilated-asymmetric": (
        (2, 7, 19, 23),
        (5, 7, 5, 3),
        {"dilations": [2, 1], "pads": [3, 0, 1, 2]},
    ),
    "by-tap-pads-past-the-kernel": ((1, 4, 6, 5), (3, 4, 3, 3), {"pads": [4, 0, 2, 5]}),
    "dense-grouped-strided-dilated": (
        (2, 12, 23, 19),
        (8, 6, 3, 2),
        {"group": 2, "strides": [3, 2], "dilations": [2, 1], "pads": [2, 0, 1, 3]},
    ),
    "pointwise-grouped": ((2, 12, 9, 7), (9, 4, 1, 1), {"group": 3}),
    # float32 1x1 of one group: the register-tiled loop (rows of 49 pixels end in a partly used
    # vector; 13 outputs and 930 pixels move the last tiles back to end at the edge).
    "pointwise-tiles-narrow": ((1, 40, 7, 7), (45, 40, 1, 1), {}),
    "pointwise-tiles-overlapping": ((2, 20, 30, 31), (13, 20, 1, 1), {}),
    "pointwise-strided": ((1, 8, 15, 15), (4, 8, 1, 1), {"strides": [2, 2]}),
    "same-upper": ((1, 5, 11, 10), (7, 5, 4, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "same-lower": ((1, 5, 11, 10), (7, 5, 4, 3), {"auto_pad": "SAME_LOWER"}),
    "1d": ((2, 6, 50), (10, 6, 5), {"strides": [4], "pads": [2, 1]}),
    "1d-grouped-dilated": ((2, 8, 31), (6, 4, 3), {"group": 2, "dilations": [3], "pads": [0, 4]}),
    "1d-frames": ((1, 1, 640), (258, 1, 256), {"strides": [128]}),
    "1d-pads-past-the-windows": ((1, 2, 1), (3, 2, 1), {"strides": [10], "pads": [5, 0]}),
    "1d-long-tiled": ((1, 64, 5000), (40, 64, 3), {"pads": [1, 1]}),
    "1d-long-by-tap": ((1, 64, 5000), (8, 64, 3), {"pads": [1, 1]}),
    "1d-depthwise": ((1, 6, 40), (6, 1, 3), {"group": 6, "pads": [1, 1]}),
    "3d": ((1, 4, 6, 7, 5), (3, 4, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),
    "empty-batch": ((0, 4, 8, 8), (4, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
}


def _model(op: str, x_shape, w_shape, attrs: dict, elem: int, domain: str = "") -> bytes:
    out_channels = w_shape[0]
    node = helper.make_node(op, ["x", "w", "b"], ["y"], domain=domain, **attrs)
    graph = helper.make_graph(
        [node],
        "conv",
        [
            helper.make_tensor_value_info("x", elem, x_shape),
            helper.make_tensor_value_info("w", elem, w_shape),
            helper.make_tensor_value_info("b", elem, [out_channels]),
        ],
        [helper.make_tensor_value_info("y", elem, None)],
    )
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()


def _run_both(model: bytes, feeds: dict[str, np.ndarray], threads: int = 0) -> tuple[np.ndarray, np.ndarray]:
    options = spawnml.SessionOptions(graph_optimization_level="disable", intra_op_num_threads=threads)
    (ours,) = spawnml.InferenceSession(model, options, providers=["cpu"]).run(None, feeds)
    reference_options = ort.SessionOptions()
    reference_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model, reference_options, providers=["CPUExecutionProvider"])
    (reference,) = session.run(None, feeds)
    return ours, reference


def _feeds(x_shape, w_shape, dtype, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal(x_shape).astype(dtype),
        "w": rng.standard_normal(w_shape).astype(dtype),
        "b": rng.standard_normal(w_shape[0]).astype(dtype),
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_matches_onnxruntime(name):
    x_shape, w_shape, attrs = CASES[name]
    feeds = _feeds(x_shape, w_shape, np.float32)
    ours, reference = _run_both(_model("Conv", x_shape, w_shape, attrs, TensorProto.FLOAT), feeds)
    assert ours.shape == reference.shape and ours.dtype == np.float32
    assert ours.flags.c_contiguous
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-4)


def _torch_conv(feeds: dict[str, np.ndarray], attrs: dict) -> np.ndarray:
    """PyTorch's convolution with ONNX's explicit ``pads`` (begins, then ends)."""
    import torch

    x, w, b = (torch.from_numpy(feeds[name]) for name in ("x", "w", "b"))
    rank = x.ndim - 2
    pads = attrs.get("pads", [0] * 2 * rank)
    x = torch.nn.functional.pad(
        x, [p for axis in reversed(range(rank)) for p in (pads[axis], pads[axis + rank])]
    )
    conv = (torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d)[rank - 1]
    stride, dilation = attrs.get("strides", 1), attrs.get("dilations", 1)
    return conv(x, w, b, stride=stride, dilation=dilation, groups=attrs.get("group", 1)).numpy()


@pytest.mark.parametrize(
    "name",
    [
        "depthwise-3x3",
        "depthwise-stride2-asymmetric-multiplier",
        "dense-grouped-strided-dilated",
        "dense-3x3-by-tap",
        "by-tap-5x3-dilated-asymmetric",
        "1d",
        "1d-grouped-dilated",
    ],
)
def test_float64_conv_matches_pytorch(name):
    """onnxruntime has no float64 Conv on the CPU; PyTorch's is the reference."""
    x_shape, w_shape, attrs = CASES[name]
    feeds = _feeds(x_shape, w_shape, np.float64)
    model = _model("Conv", x_shape, w_shape, attrs, TensorProto.DOUBLE)
    (ours,) = spawnml.InferenceSession(model, providers=["cpu"]).run(None, feeds)
    assert ours.dtype == np.float64
    np.testing.assert_allclose(ours, _torch_conv(feeds, attrs), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    ("activation", "params"),
    [
        ("Relu", []),
        ("Clip", [0.0, 6.0]),
        ("Clip", [-0.5, 0.25]),
        ("LeakyRelu", [0.2]),
        ("Sigmoid", []),
        ("Tanh", []),
        ("HardSigmoid", [0.3, 0.4]),
    ],
)
@pytest.mark.parametrize(
    "name",
    [
        "depthwise-3x3",
        "depthwise-stride2-asymmetric-multiplier",
        "dense-3x3-tiled",
        "dense-3x3-by-tap",
        "by-tap-bands",
        "pointwise-grouped",
        "pointwise-tiles-narrow",
        "pointwise-tiles-overlapping",
        "1d",
        "1d-long-tiled",
    ],
)
def test_fused_conv_matches_onnxruntime(name, activation, params):
    """FusedConv applies Relu and Clip as the convolution writes its output, the others in the
    pass that finishes it (float32)."""
    x_shape, w_shape, attrs = CASES[name]
    fused = {**attrs, "activation": activation, **({"activation_params": params} if params else {})}
    model = _model("FusedConv", x_shape, w_shape, fused, TensorProto.FLOAT, domain=MS)
    ours, reference = _run_both(model, _feeds(x_shape, w_shape, np.float32, seed=1))
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-4)


#: SpawnML's own FusedConv activations, which onnxruntime does not take, in float64.
OWN_ACTIVATIONS = {
    "Swish": lambda y: y / (1 + np.exp(-y)),
    "HardSwish": lambda y: y * np.clip(y / 6 + 0.5, 0, 1),
}


@pytest.mark.parametrize("activation", sorted(OWN_ACTIVATIONS))
@pytest.mark.parametrize(
    "name",
    [
        "depthwise-3x3",
        "depthwise-stride2-asymmetric-multiplier",
        "dense-3x3-tiled",
        "dense-3x3-by-tap",
        "pointwise-grouped",
        "pointwise-tiles-narrow",
        "pointwise-tiles-overlapping",
        "1d",
        "3d",
    ],
)
def test_fused_conv_with_spawnml_activations(name, activation):
    """Swish and HardSwish, applied in the pass that finishes the output, against onnxruntime's
    FusedConv without activation and the activation in float64."""
    x_shape, w_shape, attrs = CASES[name]
    feeds = _feeds(x_shape, w_shape, np.float32, seed=1)
    fused = _model("FusedConv", x_shape, w_shape, {**attrs, "activation": activation}, TensorProto.FLOAT, MS)
    options = spawnml.SessionOptions(graph_optimization_level="disable")
    (ours,) = spawnml.InferenceSession(fused, options, providers=["cpu"]).run(None, feeds)
    _, plain = _run_both(_model("FusedConv", x_shape, w_shape, attrs, TensorProto.FLOAT, MS), feeds)
    want = OWN_ACTIVATIONS[activation](plain.astype(np.float64))
    np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-4)


def test_flat_depthwise_keeps_nan_out_of_the_next_rows_ends():
    """The flat loop's left and right taps at a row's ends read the neighbouring row: a NaN in a
    plane's first or last column must reach only the outputs whose windows read it."""
    x_shape, w_shape, attrs = CASES["depthwise-3x3-flat-narrow-batch"]
    feeds = _feeds(x_shape, w_shape, np.float32)
    feeds["x"][1, 2, 3, 8] = feeds["x"][1, 4, 2, 0] = np.nan
    feeds["x"][0, 1, 4, 8] = np.inf
    ours, reference = _run_both(_model("Conv", x_shape, w_shape, attrs, TensorProto.FLOAT), feeds)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(reference))
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-4)


def test_conv_keeps_nan_where_the_reference_has_it():
    """A NaN input spreads to exactly the outputs whose windows read it, as in onnxruntime."""
    for case in ("depthwise-3x3", "dense-3x3-tiled", "dense-3x3-by-tap", "pointwise-tiles-overlapping"):
        x_shape, w_shape, attrs = CASES[case]
        feeds = _feeds(x_shape, w_shape, np.float32)
        feeds["x"][0, 3, 10, 10] = np.nan
        ours, reference = _run_both(_model("Conv", x_shape, w_shape, attrs, TensorProto.FLOAT), feeds)
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(reference))
        assert np.isnan(ours).any()


#: 1x1 convolutions, a thread count and the output channels of each call of the register-tiled
#: loop (none: BLAS): float32 ones of one group with a tile's rows take it, cut into spans of
#: channels over two threads from BLAS_THREADS_WORK multiply-adds an image on.
POINTWISE_PATHS = {
    "narrow-one-thread": (CASES["pointwise-tiles-narrow"], 1, [CASES["pointwise-tiles-narrow"][1][0]]),
    "narrow-two-threads": (CASES["pointwise-tiles-narrow"], 2, [CASES["pointwise-tiles-narrow"][1][0]]),
    "large-one-thread": (((1, 64, 56, 56), (96, 64, 1, 1), {}), 1, [96]),
    "large-two-threads": (((1, 64, 56, 56), (96, 64, 1, 1), {}), 2, [24, 24, 24, 24]),
    "grouped": (CASES["pointwise-grouped"], 1, []),
    "fewer-outputs-than-a-tile": (CASES["pointwise-strided"], 1, []),
}


@pytest.mark.parametrize("name", sorted(POINTWISE_PATHS))
def test_pointwise_takes_the_tiled_loop_of_one_group_and_float32(name, monkeypatch):
    from spawnml_cpu.kernels import tiles

    (x_shape, w_shape, attrs), threads, channels = POINTWISE_PATHS[name]
    calls: list[int] = []
    pointwise = tiles.pointwise
    monkeypatch.setattr(tiles, "pointwise", lambda w, *args: calls.append(len(w)) or pointwise(w, *args))
    model = _model("Conv", x_shape, w_shape, attrs, TensorProto.FLOAT)
    ours, reference = _run_both(model, _feeds(x_shape, w_shape, np.float32), threads)
    assert sorted(calls) == sorted(channels)
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-4)


def test_pointwise_gives_equal_channels_equal_bits_on_any_thread_count():
    """Equal weight rows give bit-equal output channels, and the same bits on one and two threads
    (a Softmax of large equal logits turns an ulp apart into zeros)."""
    x_shape, w_shape = (1, 512, 13, 13), (1000, 512, 1, 1)
    feeds = _feeds(x_shape, w_shape, np.float32)
    feeds["w"][:] = feeds["w"][:1] * np.float32(1e3)
    feeds["b"][:] = feeds["b"][0]
    model = _model("Conv", x_shape, w_shape, {}, TensorProto.FLOAT)
    answers = []
    for threads in (1, 2):
        options = spawnml.SessionOptions(intra_op_num_threads=threads)
        (y,) = spawnml.InferenceSession(model, options, providers=["cpu"]).run(None, feeds)
        assert (y == y[:, :1]).all()
        answers.append(y)
    np.testing.assert_array_equal(*answers)
    np.testing.assert_allclose(answers[0], _run_both(model, feeds)[1], rtol=1e-4, atol=1e-1)


#: Convolutions with two threads available, and whether each is cut over them: float32 implicit
#: GEMMs (conv_implicit) and im2col ones from MIN_SPLIT_PRODUCT multiply-adds an image on (spans of
#: output rows, or of output channels where the rows are few), depthwise ones from
#: MIN_SPLIT_DEPTHWISE outputs times taps (spans of channels), float32 1x1 ones of one group from
#: BLAS_THREADS_WORK (spans of channels on the tiled loop). Other 1x1 ones and those of products by
#: kernel tap (float64) are never cut: their GEMMs run on BLAS's threads from BLAS_THREADS_WORK
#: multiply-adds an image on.
SPLIT_CASES = {
    "depthwise-small": ((2, 32, 56, 56), (32, 1, 3, 3), {"group": 32, "pads": [1, 1, 1, 1]}, False),
    "depthwise-multiplier-strided": ((2, 16, 81, 73), (32, 1, 3, 3), {"group": 16, "strides": [2, 2]}, False),
    "depthwise-3x3": ((1, 32, 200, 200), (32, 1, 3, 3), {"group": 32, "pads": [1, 1, 1, 1]}, True),
    "depthwise-3x3-flat": ((4, 512, 30, 30), (512, 1, 3, 3), {"group": 512, "pads": [1, 1, 1, 1]}, True),
    "depthwise-5x5-batch": ((2, 48, 64, 64), (48, 1, 5, 5), {"group": 48, "pads": [2, 2, 2, 2]}, True),
    "pointwise-small": ((2, 64, 28, 28), (96, 64, 1, 1), {}, True),
    "pointwise": ((2, 64, 56, 56), (97, 64, 1, 1), {}, True),
    "pointwise-grouped": ((1, 128, 56, 56), (128, 64, 1, 1), {"group": 2}, False),
    "im2col-tiles": ((2, 32, 64, 60), (40, 32, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    "implicit-few-outputs": ((2, 32, 64, 60), (24, 32, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    "im2col-few-rows": ((1, 256, 6, 12), (256, 256, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    "im2col-grouped": (
        (1, 48, 129, 120),
        (48, 12, 3, 3),
        {"group": 4, "strides": [2, 1], "pads": [1, 0, 1, 2]},
        True,
    ),
}


@pytest.mark.parametrize("fused", [False, True], ids=["conv", "fused-clip"])
@pytest.mark.parametrize("name", sorted(SPLIT_CASES))
def test_conv_on_two_threads_matches_onnxruntime(name, fused, monkeypatch):
    """Each case also takes the path it names (cut or whole), so that the comparison covers it;
    FusedConv's bias and Clip are applied by each part to its own span."""
    from spawnml_cpu.kernels import threads

    x_shape, w_shape, attrs, split = SPLIT_CASES[name]
    cuts: list[int] = []
    run_parts = threads.run_parts
    monkeypatch.setattr(
        threads, "run_parts", lambda parts, count: cuts.append(len(parts)) or run_parts(parts, count)
    )
    feeds = _feeds(x_shape, w_shape, np.float32, seed=2)
    if fused:
        attrs = {**attrs, "activation": "Clip", "activation_params": [-1.0, 2.0]}
    model = _model(
        "FusedConv" if fused else "Conv", x_shape, w_shape, attrs, TensorProto.FLOAT, MS if fused else ""
    )
    ours, reference = _run_both(model, feeds, threads=2)
    assert bool(cuts) == split and all(parts > 1 for parts in cuts)
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-4)
