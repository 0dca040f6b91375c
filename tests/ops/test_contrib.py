"""onnxruntime's contrib operators against onnxruntime itself: the com.microsoft activations,
skip and simplified layer normalization, Attention, MatMulNBits and FusedConv, and the
ai.onnx LayerNormalization (opset < 17) and SimplifiedLayerNormalization it adds.

Tolerances: float32 results to 1e-5 (reductions and products summed in another order);
float16 results to 1e-3 relative, two units in the last place, as onnxruntime rounds
intermediate sums to float16 in places.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml

from tests.ops.conftest import make_model

MS = "com.microsoft"
F16, F32, F64 = np.float16, np.float32, np.float64
TOLERANCE = {
    F32: {"rtol": 1e-5, "atol": 1e-5},
    F16: {"rtol": 1e-3, "atol": 2e-3},
    F64: {"rtol": 1e-9, "atol": 1e-9},
}
#: Products of a few hundred terms in float32, summed in another order.
PRODUCT = {"rtol": 1e-4, "atol": 1e-4}

rng = np.random.default_rng(0)


def randn(*shape: int, dtype=F32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def node_model(op: str, inputs: dict, outputs: int = 1, domain: str = MS, opset: int = 17, **attrs) -> tuple:
    """A one-node model and its feeds; ``None`` inputs are passed as omitted ("")."""
    feeds = {name: value for name, value in inputs.items() if value is not None}
    model = make_model(op, feeds, outputs, opset=opset, domain=domain, **attrs)
    names = [name if value is not None else "" for name, value in inputs.items()]
    while names and not names[-1]:
        names.pop()
    model.graph.node[0].input[:] = names
    return model, feeds


def refused(model: onnx.ModelProto) -> str:
    with pytest.raises(spawnml.UnsupportedOperatorError) as error:
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])
    return str(error.value)


# Activations ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize(
    ("op", "bias", "attrs"),
    [
        ("Gelu", False, {}),
        ("FastGelu", False, {}),
        ("FastGelu", True, {}),
        ("BiasGelu", True, {}),
        ("QuickGelu", False, {}),
        ("QuickGelu", False, {"alpha": 1.25}),
    ],
)
def test_activations(check, op, bias, attrs, dtype):
    x = randn(2, 3, 8, dtype=dtype) * 3
    inputs = {"x": x, "bias": randn(8, dtype=dtype)} if bias else {"x": x}
    check(*node_model(op, inputs, **attrs), **TOLERANCE[dtype])


def test_quick_gelu_double(check):
    """onnxruntime runs the other activations in float32 and float16 only."""
    x = randn(4, 5, dtype=F64) * 3
    check(*node_model("QuickGelu", {"x": x}), **TOLERANCE[F64])


# Normalization -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("optional", ["none", "beta", "bias", "both"])
@pytest.mark.parametrize("skip_shape", ["same", "broadcast"])
@pytest.mark.parametrize("outputs", [1, 4])
def test_skip_layer_normalization(check, dtype, optional, skip_shape, outputs):
    x = randn(2, 3, 16, dtype=dtype)
    skip = randn(*((2, 3, 16) if skip_shape == "same" else (1, 3, 16)), dtype=dtype)
    inputs = {"x": x, "skip": skip, "gamma": randn(16, dtype=dtype)}
    inputs["beta"] = randn(16, dtype=dtype) if optional in ("beta", "both") else None
    inputs["bias"] = randn(16, dtype=dtype) if optional in ("bias", "both") else None
    check(*node_model("SkipLayerNormalization", inputs, outputs, epsilon=1e-5), **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("bias", [False, True])
def test_skip_simplified_layer_normalization(check, dtype, bias):
    x = randn(6, 16, dtype=dtype)
    inputs = {"x": x, "skip": randn(6, 16, dtype=dtype), "gamma": randn(16, dtype=dtype)}
    inputs["bias"] = randn(16, dtype=dtype) if bias else None
    model, feeds = node_model("SkipSimplifiedLayerNormalization", inputs, 4)
    model.graph.node[0].output[1] = ""  # onnxruntime leaves the mean output unset
    model.graph.output.remove(model.graph.output[1])
    check(model, feeds, **TOLERANCE[dtype])


@pytest.mark.parametrize(("x_type", "scale_type"), [(F32, F32), (F16, F16), (F16, F32), (F64, F64)])
@pytest.mark.parametrize("axis", [-1, 1])
def test_simplified_layer_normalization(check, x_type, scale_type, axis):
    x = randn(2, 3, 8, dtype=x_type)
    scale = randn(*x.shape[axis:] if axis > 0 else (8,), dtype=scale_type)
    model, feeds = node_model(
        "SimplifiedLayerNormalization", {"x": x, "scale": scale}, 2, domain="", axis=axis
    )
    check(model, feeds, **TOLERANCE[x_type])


@pytest.mark.parametrize(("x_type", "scale_type"), [(F32, F32), (F16, F16), (F16, F32), (F64, F64)])
@pytest.mark.parametrize("bias", [False, True])
def test_layer_normalization_before_opset_17(check, x_type, scale_type, bias):
    x = randn(2, 3, 8, dtype=x_type)
    inputs = {
        "x": x,
        "scale": randn(8, dtype=scale_type),
        "bias": randn(8, dtype=scale_type) if bias else None,
    }
    check(*node_model("LayerNormalization", inputs, 3, domain="", opset=16), **TOLERANCE[x_type])


# Attention -----------------------------------------------------------------------------------


def attention_inputs(batch=2, length=4, hidden=16, sizes=None, dtype=F32, **extra) -> dict:
    width = sum(sizes) if sizes else 3 * hidden
    inputs = {
        "x": randn(batch, length, hidden, dtype=dtype),
        "weights": randn(hidden, width, dtype=dtype) * 0.3,
    }
    return {**inputs, "bias": randn(width, dtype=dtype), **extra}


MASKS = {
    "none": None,
    "end": np.array([3, 1], np.int32),
    "end-start": np.array([4, 3, 1, 0], np.int32),
    "raw": np.array([[1, 1, 0, 1], [1, 0, 0, 0]], np.int32),
    "raw-3d": (rng.random((2, 4, 4)) > 0.3).astype(np.int32),
}


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("unidirectional", [0, 1])
@pytest.mark.parametrize("heads", [1, 4])
def test_attention(check, mask, unidirectional, heads):
    inputs = attention_inputs(mask_index=MASKS[mask])
    check(*node_model("Attention", inputs, num_heads=heads, unidirectional=unidirectional), **PRODUCT)


@pytest.mark.parametrize("sizes", [(16, 16, 8), (8, 8, 24)])
def test_attention_hidden_sizes(check, sizes):
    inputs = attention_inputs(sizes=sizes)
    check(*node_model("Attention", inputs, num_heads=4, qkv_hidden_sizes=list(sizes)), **PRODUCT)


@pytest.mark.parametrize("unidirectional", [0, 1])
@pytest.mark.parametrize("mask", [False, True])
def test_attention_with_past(check, unidirectional, mask):
    """A key/value cache of 3 steps, extended by 2 and returned as ``present``."""
    mask_index = np.array([[1, 0, 1, 1, 1], [1, 1, 1, 1, 0]], np.int32) if mask else None
    inputs = attention_inputs(length=2, mask_index=mask_index, past=randn(2, 2, 4, 3, 4))
    model, feeds = node_model("Attention", inputs, 2, num_heads=4, unidirectional=unidirectional)
    check(model, feeds, **PRODUCT)


def test_attention_bias_and_scale(check):
    inputs = attention_inputs(mask_index=MASKS["raw"], past=None, attention_bias=randn(1, 4, 4, 4))
    check(*node_model("Attention", inputs, num_heads=4, scale=0.5, mask_filter_value=-500.0), **PRODUCT)


def test_attention_no_bias_float16(check):
    inputs = attention_inputs(dtype=F16, mask_index=MASKS["end"])
    inputs["bias"] = None
    model, feeds = node_model("Attention", inputs, num_heads=2)
    check(model, feeds, rtol=1e-2, atol=1e-2)


def test_attention_refusals():
    inputs = attention_inputs()
    assert "rotary" in refused(node_model("Attention", inputs, num_heads=4, do_rotary=1)[0])
    uneven = node_model("Attention", inputs, num_heads=4, qkv_hidden_sizes=[16, 8, 24])[0]
    assert "qkv_hidden_sizes" in refused(uneven)
    both = attention_inputs(mask_index=None, past=randn(2, 2, 4, 3, 4), attention_bias=randn(1, 4, 4, 7))
    assert "past and attention_bias" in refused(node_model("Attention", both, num_heads=4)[0])


# MatMulNBits ---------------------------------------------------------------------------------


def quantized_weights(n: int, k: int, bits: int, block: int, zero_points: str, dtype=F32) -> dict:
    """Random packed weights, scales and zero points (``none``, ``packed`` or ``float``)."""
    blocks = -(-k // block)
    values = rng.integers(0, 1 << bits, (n, blocks, block), dtype=np.uint8)
    per_byte = 8 // bits
    fields = values.reshape(n, blocks, block // per_byte, per_byte)
    packed = np.zeros(fields.shape[:-1], np.uint8)
    for i in range(per_byte):
        packed |= fields[..., i] << np.uint8(i * bits)
    inputs = {"b": packed, "scales": (rng.uniform(0.01, 0.1, n * blocks)).astype(dtype)}
    if zero_points == "packed":
        points = rng.integers(0, 1 << bits, (n, -(-blocks // per_byte) * per_byte), dtype=np.uint8)
        points = points.reshape(n, -1, per_byte)
        packed_points = np.zeros(points.shape[:-1], np.uint8)
        for i in range(per_byte):
            packed_points |= points[..., i] << np.uint8(i * bits)
        inputs["zero_points"] = packed_points.reshape(-1)
    elif zero_points == "float":
        inputs["zero_points"] = rng.uniform(0, (1 << bits) - 1, n * blocks).astype(dtype)
    return inputs


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("zero_points", ["none", "packed", "float"])
@pytest.mark.parametrize(("k", "block"), [(64, 16), (96, 32), (100, 32)])
def test_matmul_nbits(check, bits, zero_points, k, block):
    if bits == 8 and zero_points == "float":
        pytest.skip("onnxruntime's CPU kernel has no 8-bit weights with float zero points")
    n = 24
    weights = quantized_weights(n, k, bits, block, zero_points)
    inputs = {"a": randn(2, 3, k), **weights}
    model, feeds = node_model("MatMulNBits", inputs, K=k, N=n, bits=bits, block_size=block)
    for name in weights:
        feeds.pop(name)
        model.graph.input.remove(next(i for i in model.graph.input if i.name == name))
        model.graph.initializer.append(onnx.numpy_helper.from_array(weights[name], name))
    check(model, feeds, **PRODUCT)


def test_matmul_nbits_bias_float16(check):
    n, k, block = 16, 64, 32
    weights = quantized_weights(n, k, 4, block, "packed", F16)
    inputs = {"a": randn(5, k, dtype=F16), **weights, "g_idx": None, "bias": randn(n, dtype=F16)}
    inputs["zero_points"] = weights["zero_points"]
    check(*node_model("MatMulNBits", inputs, K=k, N=n, bits=4, block_size=block), rtol=1e-2, atol=1e-2)


# FusedConv -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("activation", "params"),
    [
        ("Relu", []),
        ("Tanh", []),
        ("Sigmoid", []),
        ("LeakyRelu", [0.2]),
        ("Clip", [-0.5, 0.5]),
        ("HardSigmoid", [0.3, 0.4]),
    ],
)
@pytest.mark.parametrize("z", [False, True])
def test_fused_conv(check, activation, params, z):
    x, w, b = randn(2, 3, 7, 6), randn(4, 3, 3, 3), randn(4)
    inputs = {"x": x, "w": w, "b": b, "z": randn(2, 4, 7, 6) if z else None}
    attrs = {"activation": activation, "activation_params": params} if params else {"activation": activation}
    check(*node_model("FusedConv", inputs, pads=[1, 1, 1, 1], **attrs), **PRODUCT)


def test_fused_conv_without_activation():
    """onnxruntime requires an activation; without one FusedConv is its Conv."""
    inputs = {"x": randn(2, 3, 7, 6), "w": randn(4, 3, 3, 3), "b": randn(4)}
    fused, feeds = node_model("FusedConv", inputs, pads=[1, 1, 1, 1])
    plain, _ = node_model("Conv", inputs, domain="", pads=[1, 1, 1, 1])
    (ours,) = spawnml.InferenceSession(fused.SerializeToString()).run(None, feeds)
    reference = onnxruntime.InferenceSession(plain.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(ours, reference.run(None, feeds)[0], **PRODUCT)


def test_fused_conv_strided_grouped(check):
    inputs = {"x": randn(1, 4, 9, 9), "w": randn(6, 2, 3, 3), "b": randn(6)}
    model, feeds = node_model("FusedConv", inputs, activation="Relu", strides=[2, 2], group=2)
    check(model, feeds, **PRODUCT)


def test_fused_conv_unknown_activation_refused():
    inputs = {"x": randn(1, 3, 5, 5), "w": randn(2, 3, 3, 3)}
    assert "activation" in refused(node_model("FusedConv", inputs, activation="Gelu")[0])


def test_attention_causal_mask_is_absolute():
    """Causally hidden keys get the lowest float, which no attention bias can lift; keys a
    mask hides get ``mask_filter_value`` added, which a large bias can."""
    bias = np.zeros((1, 1, 4, 4), F32)
    bias[..., 0, 3] = bias[..., 1, 2] = 30000.0
    inputs = attention_inputs(mask_index=np.array([[1, 1, 0, 1], [1, 1, 1, 1]], np.int32), past=None)
    inputs["attention_bias"] = bias
    model, feeds = node_model("Attention", inputs, num_heads=2, unidirectional=1)
    (ours,) = spawnml.InferenceSession(model.SerializeToString()).run(None, feeds)
    reference = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(ours, reference.run(None, feeds)[0], **PRODUCT)


def test_attention_fully_masked_rows():
    """A row whose keys are all masked adds ``mask_filter_value`` to every score: softmax
    ignores the shift, but float32 keeps scores near -10000 only to 1e-3, so this compares at 1e-3."""
    inputs = attention_inputs(mask_index=np.array([[0, 0, 0, 0], [1, 0, 1, 0]], np.int32))
    model, feeds = node_model("Attention", inputs, num_heads=2)
    (ours,) = spawnml.InferenceSession(model.SerializeToString()).run(None, feeds)
    reference = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(ours, reference.run(None, feeds)[0], rtol=1e-3, atol=1e-3)
