"""Convolution, pooling, normalization, Resize and Pad on every GPU backend against onnxruntime.

Each case is a one-node ONNX model run whole on the GPU provider (its placement is checked)
and on onnxruntime's CPU provider, on the same random inputs. Tolerances: exact for
selections (nearest Resize, Pad, MaxPool and its Indices); for convolutions and pooling
sums, 1e-5 relative plus an absolute 1e-6 per summed product (float32 summed in another
order); 1e-5 for the normalizations and interpolating Resize (WGSL and OpenCL allow a few
ulp in exp, division and rsqrt).
"""

from __future__ import annotations

import math

import numpy as np
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper

from tests.backends import GPU_BACKENDS, backend_or_skip

rng = np.random.default_rng(31)


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def model(op: str, inputs: dict, constants: dict | None = None, opset: int = 17, domain: str = "", **attrs):
    """A one-node model: ``inputs`` fed, ``constants`` as initializers (a name starting with
    ``_`` leaves that optional input out), one output ``y`` of the first input's type."""
    constants = constants or {}
    names = [*inputs, *constants]
    node = helper.make_node(op, [n if n[0] != "_" else "" for n in names], ["y"], domain=domain, **attrs)
    graph = helper.make_graph(
        [node],
        op,
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in inputs.items()
        ],
        [
            helper.make_tensor_value_info(
                "y", helper.np_dtype_to_tensor_dtype(next(iter(inputs.values())).dtype), None
            )
        ],
        [numpy_helper.from_array(v, n) for n, v in constants.items() if n[0] != "_"],
    )
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=9).SerializeToString()


def compare(provider: str, onnx_model: bytes, feeds: dict, rtol: float = 0.0, atol: float = 0.0):
    """Run on the GPU alone and on onnxruntime; equal within ``rtol``/``atol`` (0: exactly)."""
    session = spawnml.InferenceSession(onnx_model, providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    (got,) = session.run(None, feeds)
    (want,) = onnxruntime.InferenceSession(onnx_model, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    if rtol or atol:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


def summed(count: int) -> dict[str, float]:
    """The tolerance of float32 sums of ``count`` products of unit-scale values."""
    return {"rtol": 1e-5, "atol": 1e-6 * max(count, 1)}


# Convolutions: (x shape, w shape, attributes); the last ones take the tiled matrix-product path.
CONVS = [
    ((1, 3, 9, 11), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 10, 9), (6, 4, 3, 2), {"strides": [2, 1], "dilations": [2, 1], "pads": [0, 2, 1, 0]}),
    ((1, 6, 8, 8), (4, 3, 3, 3), {"group": 2, "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 4, 7, 8), (8, 1, 3, 3), {"group": 4, "auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ((1, 5, 7, 7), (5, 1, 5, 5), {"group": 5, "auto_pad": "VALID"}),
    ((2, 3, 17), (4, 3, 4), {"strides": [3], "pads": [2, 1]}),
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1], "dilations": [2, 1, 1]}),
    ((2, 64, 9, 10), (40, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 96, 12, 7), (64, 48, 3, 3), {"group": 2, "strides": [2, 1], "pads": [1, 1, 1, 1]}),
    ((1, 64, 11, 13), (48, 64, 5, 5), {"pads": [2, 1, 2, 3], "dilations": [1, 2]}),
]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), CONVS, ids=lambda v: str(v).replace(" ", ""))
def test_conv(provider, x_shape, w_shape, attrs, bias):
    x, w = f32(*x_shape), f32(*w_shape)
    constants = {"w": w, **({"b": f32(w_shape[0])} if bias else {})}
    onnx_model = model("Conv", {"x": x}, constants, **attrs)
    compare(provider, onnx_model, {"x": x}, **summed(math.prod(w_shape[1:])))


ACTIVATIONS = [
    ("Relu", []),
    ("Tanh", []),
    ("Sigmoid", []),
    ("LeakyRelu", [0.2]),
    ("HardSigmoid", [0.25, 0.4]),
    ("Clip", [-0.5, 0.75]),
    ("Clip", [0.0, math.inf]),
]


@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), [CONVS[0], CONVS[3], CONVS[7]], ids=str)
@pytest.mark.parametrize(("activation", "params"), ACTIVATIONS, ids=str)
def test_fused_conv(provider, x_shape, w_shape, attrs, activation, params):
    x, w, b = f32(*x_shape), f32(*w_shape), f32(w_shape[0])
    extra = {"activation_params": params} if params else {}
    onnx_model = model(
        "FusedConv",
        {"x": x},
        {"w": w, "b": b},
        domain="com.microsoft",
        activation=activation,
        **attrs,
        **extra,
    )
    compare(provider, onnx_model, {"x": x}, **summed(math.prod(w_shape[1:])))


TRANSPOSED = [
    ((1, 4, 6, 5), (4, 3, 2, 2), {"strides": [2, 2]}),
    ((2, 3, 5, 4), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 0]}),
    ((1, 4, 5, 6), (4, 3, 3, 2), {"group": 2, "dilations": [2, 1], "strides": [1, 2]}),
    ((1, 2, 7), (2, 3, 3), {"strides": [2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "output_shape": [9, 8]}),
]


@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), TRANSPOSED, ids=lambda v: str(v).replace(" ", ""))
def test_conv_transpose(provider, x_shape, w_shape, attrs):
    x, w, b = f32(*x_shape), f32(*w_shape), f32(w_shape[1] * attrs.get("group", 1))
    onnx_model = model("ConvTranspose", {"x": x}, {"w": w, "b": b}, **attrs)
    compare(provider, onnx_model, {"x": x}, **summed(x_shape[1] * math.prod(w_shape[2:])))


POOLS = [
    ((1, 3, 8, 10), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 2, 9, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ((1, 2, 12, 10), {"kernel_shape": [3, 2], "strides": [3, 2]}),
    ((1, 2, 11, 9), {"kernel_shape": [3, 3], "dilations": [2, 1], "pads": [2, 0, 1, 1]}),
    ((2, 3, 13), {"kernel_shape": [4], "strides": [3], "pads": [2, 1], "ceil_mode": 1}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "auto_pad": "SAME_UPPER", "strides": [2, 2, 2]}),
]


@pytest.mark.parametrize(("shape", "attrs"), POOLS, ids=lambda v: str(v).replace(" ", ""))
def test_max_pool(provider, shape, attrs):
    x = f32(*shape)
    compare(provider, model("MaxPool", {"x": x}, opset=12, **attrs), {"x": x})


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_max_pool_on_integers(provider, dtype):
    x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (1, 2, 7, 6), dtype=dtype)
    onnx_model = model("MaxPool", {"x": x}, opset=12, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    compare(provider, onnx_model, {"x": x})


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize(("shape", "attrs"), POOLS, ids=lambda v: str(v).replace(" ", ""))
def test_average_pool(provider, shape, attrs, include_pad):
    x = f32(*shape)
    onnx_model = model("AveragePool", {"x": x}, opset=19, count_include_pad=include_pad, **attrs)
    compare(provider, onnx_model, {"x": x}, **summed(math.prod(attrs["kernel_shape"])))


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize(("shape", "attrs"), POOLS, ids=lambda v: str(v).replace(" ", ""))
def test_lp_pool(provider, shape, attrs, p):
    x = f32(*shape)
    onnx_model = model("LpPool", {"x": x}, opset=18, p=p, **attrs)
    compare(provider, onnx_model, {"x": x}, **summed(math.prod(attrs["kernel_shape"])))


@pytest.mark.parametrize("shape", [(2, 3, 7, 9), (1, 5, 200), (1, 2, 3, 4, 5)], ids=str)
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pools(provider, op, shape):
    x = f32(*shape)
    tolerance = summed(math.prod(shape[2:])) if op == "GlobalAveragePool" else {}
    compare(provider, model(op, {"x": x}), {"x": x}, **tolerance)


@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (4, 6), (1, 3, 7)], ids=str)
def test_batch_normalization(provider, shape):
    channels = shape[1]
    x = f32(*shape)
    statistics = {
        "scale": f32(channels),
        "bias": f32(channels),
        "mean": f32(channels),
        "var": rng.random(channels).astype(np.float32) + 0.1,
    }
    onnx_model = model("BatchNormalization", {"x": x}, statistics, opset=15, epsilon=1e-3)
    compare(provider, onnx_model, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 3, 6, 5), (1, 4, 300), (3, 2, 1)], ids=str)
def test_instance_normalization(provider, shape):
    x = f32(*shape) * 3 + 1
    onnx_model = model(
        "InstanceNormalization", {"x": x}, {"s": f32(shape[1]), "b": f32(shape[1])}, epsilon=1e-4
    )
    compare(provider, onnx_model, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("shape", "groups"), [((2, 6, 5, 4), 3), ((1, 8, 130), 2), ((1, 4, 3, 3), 4)], ids=str
)
def test_group_normalization(provider, shape, groups):
    x = f32(*shape) * 2 - 1
    scale, bias = f32(shape[1]), f32(shape[1])
    onnx_model = model("GroupNormalization", {"x": x}, {"s": scale, "b": bias}, opset=21, num_groups=groups)
    compare(provider, onnx_model, {"x": x}, rtol=1e-5, atol=1e-5)


# Resize: (input shape, scales or sizes, attributes); nearest picks must agree exactly.
NEAREST = [
    ((1, 2, 5, 7), [1, 1, 2, 2], {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}),
    ((1, 2, 6, 9), [1, 1, 0.5, 0.7], {}),
    ((2, 1, 4, 5), [1, 1, 1.5, 2.5], {"coordinate_transformation_mode": "align_corners"}),
    ((1, 3, 7, 4), [1, 1, 3, 1.25], {"nearest_mode": "round_prefer_ceil"}),
    (
        (1, 1, 9, 8),
        [1, 1, 0.4, 0.6],
        {"nearest_mode": "ceil", "coordinate_transformation_mode": "asymmetric"},
    ),
]
LINEAR = [
    ((1, 2, 5, 7), [1, 1, 2, 2], {"coordinate_transformation_mode": "half_pixel"}),
    ((1, 2, 6, 9), [1, 1, 0.5, 0.7], {"coordinate_transformation_mode": "pytorch_half_pixel"}),
    ((2, 3, 4, 5), [1, 1, 1.5, 2.5], {"coordinate_transformation_mode": "align_corners"}),
    ((1, 1, 7, 4), [1, 1, 3, 1.25], {"coordinate_transformation_mode": "asymmetric"}),
    ((2, 5, 3), [1, 1, 2.5], {}),
]


def _resize(provider, shape, scales, attrs, mode, sizes=False, **tolerance):
    x = f32(*shape)
    if sizes:
        given = {"_roi": np.zeros(0, np.float32), "_scales": np.zeros(0, np.float32)}
        given["sizes"] = np.array([math.floor(d * s) for d, s in zip(shape, scales, strict=True)], np.int64)
    else:
        given = {"_roi": np.zeros(0, np.float32), "scales": np.array(scales, np.float32)}
    onnx_model = model("Resize", {"x": x}, given, opset=13, mode=mode, **attrs)
    compare(provider, onnx_model, {"x": x}, **tolerance)


@pytest.mark.parametrize("sizes", [False, True], ids=["scales", "sizes"])
@pytest.mark.parametrize(("shape", "scales", "attrs"), NEAREST, ids=lambda v: str(v).replace(" ", ""))
def test_resize_nearest(provider, shape, scales, attrs, sizes):
    _resize(provider, shape, scales, attrs, "nearest", sizes)


@pytest.mark.parametrize(("shape", "scales", "attrs"), LINEAR, ids=lambda v: str(v).replace(" ", ""))
def test_resize_linear(provider, shape, scales, attrs):
    _resize(provider, shape, scales, attrs, "linear", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("exclude", [0, 1])
def test_resize_cubic(provider, exclude):
    _resize(
        provider, (1, 2, 6, 5), [1, 1, 1.7, 0.8], {"exclude_outside": exclude}, "cubic", rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias(provider, mode):
    x = f32(1, 2, 16, 13)
    given = {"_roi": np.zeros(0, np.float32), "scales": np.array([1, 1, 0.3, 0.55], np.float32)}
    onnx_model = model("Resize", {"x": x}, given, opset=18, mode=mode, antialias=1)
    compare(provider, onnx_model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_resize_10(provider):
    x = f32(1, 2, 3, 4)
    onnx_model = model("Resize", {"x": x}, {"scales": np.array([1, 1, 2, 3], np.float32)}, opset=10)
    compare(provider, onnx_model, {"x": x})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_crop(provider, mode):
    x = f32(1, 2, 6, 7)
    roi = np.array([0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4], np.float32)  # partly outside the input
    given = {"roi": roi, "_scales": np.zeros(0, np.float32), "sizes": np.array([1, 2, 5, 4], np.int64)}
    onnx_model = model(
        "Resize",
        {"x": x},
        given,
        opset=13,
        mode=mode,
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=-3.5,
    )
    compare(provider, onnx_model, {"x": x}, rtol=1e-5, atol=1e-6)


PADS = [
    ("constant", [1, 0, 2, 3, 0, 1, 1, 2]),
    ("reflect", [0, 1, 3, 2, 0, 2, 2, 3]),
    ("edge", [1, 0, 4, 1, 0, 1, 0, 5]),
    ("wrap", [0, 1, 2, 3, 0, 0, 3, 1]),
    ("constant", [0, 0, -1, 2, 0, 0, 1, -2]),
    ("edge", [0, 0, -2, 0, 0, 0, 0, 3]),
]


@pytest.mark.parametrize(("mode", "pads"), PADS, ids=str)
def test_pad(provider, mode, pads):
    x = f32(2, 3, 5, 6)
    constants = {"pads": np.array(pads, np.int64)}
    if mode == "constant":
        constants["value"] = np.array(1.5, np.float32)
    compare(provider, model("Pad", {"x": x}, constants, opset=19, mode=mode), {"x": x})


def test_pad_axes_and_integers(provider):
    x = rng.integers(-100, 100, (3, 4, 5)).astype(np.int64)
    constants = {"pads": np.array([2, 1, 0, 3], np.int64), "value": np.array(7, np.int64)}
    constants["axes"] = np.array([-1, 0], np.int64)
    compare(provider, model("Pad", {"x": x}, constants, opset=18), {"x": x})
    y = f32(4, 5)
    compare(provider, model("Pad", {"x": y}, opset=2, mode="reflect", pads=[1, 2, 2, 3]), {"x": y})


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize(("shape", "attrs"), [POOLS[1], POOLS[3], POOLS[4], POOLS[5]], ids=str)
def test_max_pool_indices(provider, shape, attrs, storage_order):
    x = f32(*shape)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], storage_order=storage_order, **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("i", TensorProto.INT64, None),
        ],
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)]).SerializeToString()
    session = spawnml.InferenceSession(onnx_model, providers=[provider])
    reference = onnxruntime.InferenceSession(onnx_model, providers=["CPUExecutionProvider"])
    for got, want in zip(session.run(None, {"x": x}), reference.run(None, {"x": x}), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("target", "axes"), [([3, 9], [1, 2]), ([8, 2, 5], None), ([7, 4], [-1, 0])], ids=str
)
def test_center_crop_pad(provider, target, axes):
    x = f32(4, 5, 6)
    extra = {} if axes is None else {"axes": axes}
    onnx_model = model("CenterCropPad", {"x": x}, {"shape": np.array(target, np.int64)}, opset=18, **extra)
    compare(provider, onnx_model, {"x": x})


def test_refusals_are_precise(provider):
    x = f32(2, 3, 4)
    # Batch statistics run on the GPU from opset 14 (training_mode); before, they are refused.
    training = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "mean", "var"])
    graph = helper.make_graph(
        [training],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "mean", "var")],
        [numpy_helper.from_array(np.ones(3, np.float32), n) for n in "sbmv"],
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)]).SerializeToString()
    with pytest.raises(spawnml.UnsupportedOperatorError, match="training mode"):
        spawnml.InferenceSession(onnx_model, providers=[provider])
    doubles = model("Conv", {"x": x.astype(np.float64)}, {"w": f32(1, 3, 1).astype(np.float64)})
    with pytest.raises(spawnml.UnsupportedOperatorError, match="Conv"):
        spawnml.InferenceSession(doubles, providers=[provider])
