"""onnxruntime's quantized contrib operators, one node at a time, on the settings the tools' models
do not reach (broadcasting, transposes, float outputs, legacy axes, int8 wrapping, padding
rules, sequence lengths). Integer outputs must be onnxruntime's exactly; float outputs of exact
integer sums agree to float32 rounding. int8 weights span their whole range wherever onnxruntime's
products are exact (see tests/ort_int8.py).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import helper, numpy_helper

from tests.ort_int8 import int8_weights

MS = "com.microsoft"
RNG_SEED = 31


def _model(
    op_type: str,
    inputs: list[tuple[str, np.ndarray | None]],
    outputs: int,
    feeds: tuple[str, ...],
    domain: str = MS,
    **attrs,
) -> onnx.ModelProto:
    """One ``op_type`` node; ``inputs`` in order (None: an absent optional input), those named in
    ``feeds`` graph inputs and the rest initializers."""
    names = [name if value is not None else "" for name, value in inputs]
    output_names = [f"y{index}" for index in range(outputs)]
    node = helper.make_node(op_type, names, output_names, domain=domain, **attrs)
    graph = helper.make_graph(
        [node],
        "node",
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
            for name, value in inputs
            if value is not None and name in feeds
        ],
        [helper.make_value_info(name, onnx.TypeProto()) for name in output_names],
        [
            numpy_helper.from_array(value, name)
            for name, value in inputs
            if value is not None and name not in feeds
        ],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def _run(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], threads: int = 1
) -> list[tuple[np.ndarray, np.ndarray]]:
    data = model.SerializeToString()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    theirs = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"]).run(None, feeds)
    ours = spawnml.InferenceSession(data, providers=["cpu"]).run(None, feeds)
    return [(np.asarray(got), want) for got, want in zip(ours, theirs, strict=True)]


def _assert_same(pairs: list[tuple[np.ndarray, np.ndarray]], rtol: float = 0.0) -> None:
    for got, want in pairs:
        assert (got.dtype, got.shape) == (want.dtype, want.shape)
        if rtol:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * float(np.abs(want).max()))
        else:
            np.testing.assert_array_equal(got, want)


def _quantized(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def _scalar(value: float | int, dtype: type) -> np.ndarray:
    return np.array(value, dtype)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("b_shape", [(40,), (3, 5, 40), ()], ids=["row", "same", "scalar"])
def test_binary_broadcast(op: str, dtype: type, b_shape: tuple[int, ...]):
    rng = np.random.default_rng(RNG_SEED)
    a, b = _quantized(rng, (3, 5, 40), dtype), _quantized(rng, b_shape, dtype)
    zero = 3 if dtype == np.uint8 else -5
    inputs = [
        ("a", a),
        ("a_scale", _scalar(0.02, np.float32)),
        ("a_zero", _scalar(zero, dtype)),
        ("b", b),
        ("b_scale", _scalar(0.035, np.float32)),
        ("b_zero", _scalar(-zero if dtype == np.int8 else 7, dtype)),
        ("c_scale", _scalar(0.05 if op == "QLinearAdd" else 0.6, np.float32)),
        ("c_zero", _scalar(zero, dtype)),
    ]
    _assert_same(_run(_model(op, inputs, 1, ("a", "b")), {"a": a, "b": b}))


@pytest.mark.parametrize("y_quantized", [False, True], ids=["float", "quantized"])
@pytest.mark.parametrize(("trans_a", "trans_b"), [(0, 0), (1, 1)])
@pytest.mark.parametrize("per_column", [False, True], ids=["tensor", "column"])
def test_qgemm(y_quantized: bool, trans_a: int, trans_b: int, per_column: bool):
    rng = np.random.default_rng(RNG_SEED)
    m, k, n = 5, 7, 6
    a = _quantized(rng, (k, m) if trans_a else (m, k), np.uint8)
    b = int8_weights(rng, (n, k) if trans_b else (k, n))
    b_scale = (rng.random(n if per_column else 1) * 0.01 + 0.001).astype(np.float32)
    inputs: list[tuple[str, np.ndarray | None]] = [
        ("a", a),
        ("a_scale", _scalar(0.03, np.float32)),
        ("a_zero", _scalar(120, np.uint8)),
        ("b", b),
        ("b_scale", b_scale),
        ("b_zero", np.zeros(b_scale.shape, np.int8)),
        ("c", rng.integers(-3000, 3000, (n,)).astype(np.int32)),
    ]
    if y_quantized:
        inputs += [("y_scale", _scalar(0.04, np.float32)), ("y_zero", _scalar(128, np.uint8))]
    model = _model("QGemm", inputs, 1, ("a",), alpha=0.75, transA=trans_a, transB=trans_b)
    _assert_same(_run(model, {"a": a}), rtol=0 if y_quantized else 1e-6)


@pytest.mark.parametrize(("opset", "axis"), [(13, -1), (13, 1), (12, 1)])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_softmax(opset: int, axis: int, dtype: type):
    """onnxruntime's table softmax, also over the flattened axes before opset 13, and its int8
    outputs that wrap past 127."""
    rng = np.random.default_rng(RNG_SEED)
    x = _quantized(rng, (2, 3, 5), dtype)
    zero = 0 if dtype == np.uint8 else -128
    inputs = [
        ("x", x),
        ("x_scale", _scalar(0.08, np.float32)),
        ("x_zero", _scalar(zero, dtype)),
        ("y_scale", _scalar(1 / 256, np.float32)),
        ("y_zero", _scalar(zero, dtype)),
    ]
    _assert_same(_run(_model("QLinearSoftmax", inputs, 1, ("x",), axis=axis, opset=opset), {"x": x}))


@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("pads", [[0, 0, 0, 0], [1, 0, 1, 1]])
def test_qlinear_average_pool(ceil_mode: int, include_pad: int, pads: list[int]):
    rng = np.random.default_rng(RNG_SEED)
    x = _quantized(rng, (1, 3, 7, 8), np.uint8)
    inputs = [
        ("x", x),
        ("x_scale", _scalar(0.05, np.float32)),
        ("x_zero", _scalar(100, np.uint8)),
        ("y_scale", _scalar(0.03, np.float32)),
        ("y_zero", _scalar(90, np.uint8)),
    ]
    model = _model(
        "QLinearAveragePool",
        inputs,
        1,
        ("x",),
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=pads,
        ceil_mode=ceil_mode,
        count_include_pad=include_pad,
    )
    _assert_same(_run(model, {"x": x}))


def test_qlinear_concat_rescales():
    """Inputs at their own scales and zero points rescaled to the output's, one already at it."""
    rng = np.random.default_rng(RNG_SEED)
    parts = [_quantized(rng, (2, width, 3), np.uint8) for width in (1, 2, 3)]
    params = [(0.02, 10), (0.05, 128), (0.04, 128)]
    inputs: list[tuple[str, np.ndarray | None]] = [
        ("y_scale", _scalar(0.04, np.float32)),
        ("y_zero", _scalar(128, np.uint8)),
    ]
    for index, (part, (scale, zero)) in enumerate(zip(parts, params, strict=True)):
        inputs += [
            (f"x{index}", part),
            (f"s{index}", _scalar(scale, np.float32)),
            (f"z{index}", _scalar(zero, np.uint8)),
        ]
    feeds = {f"x{index}": part for index, part in enumerate(parts)}
    _assert_same(_run(_model("QLinearConcat", inputs, 1, tuple(feeds), axis=1), feeds))


@pytest.mark.parametrize("zero_points", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_matmul_integer_to_float(zero_points: bool, bias: bool):
    rng = np.random.default_rng(RNG_SEED)
    a, b = _quantized(rng, (2, 3, 8), np.uint8), int8_weights(rng, (8, 5))
    inputs = [
        ("a", a),
        ("b", b),
        ("a_scale", _scalar(0.021, np.float32)),
        ("b_scale", (rng.random(5) * 0.01 + 0.001).astype(np.float32)),
        ("a_zero", _scalar(131, np.uint8) if zero_points else None),
        ("b_zero", np.zeros(5, np.int8) if zero_points else None),
        ("bias", rng.standard_normal(5).astype(np.float32) if bias else None),
    ]
    _assert_same(_run(_model("MatMulIntegerToFloat", inputs, 1, ("a",)), {"a": a}), rtol=1e-6)


@pytest.mark.parametrize("weights", [np.uint8, np.int8])
def test_dynamic_quantize_matmul(weights: type):
    """A per-column-scaled product with a bias; A's range holds no zero on one side."""
    rng = np.random.default_rng(RNG_SEED)
    a = (rng.random((3, 4, 16)) * 5 + 0.5).astype(np.float32)
    zero = 0 if weights == np.int8 else 128
    inputs = [
        ("a", a),
        ("b", int8_weights(rng, (16, 6)) if weights == np.int8 else _quantized(rng, (16, 6), weights)),
        ("b_scale", (rng.random(6) * 0.01 + 0.001).astype(np.float32)),
        ("b_zero", np.full(6, zero, weights)),
        ("bias", rng.standard_normal(6).astype(np.float32)),
    ]
    _assert_same(_run(_model("DynamicQuantizeMatMul", inputs, 1, ("a",)), {"a": a}), rtol=1e-6)


@pytest.mark.parametrize(
    ("trans_a", "trans_b", "alpha"), [(0, 0, 1.0), (1, 0, 0.5), (0, 1, 2.0), (1, 1, 0.125)]
)
def test_fused_matmul(trans_a: int, trans_b: int, alpha: float):
    rng = np.random.default_rng(RNG_SEED)
    a = rng.standard_normal((2, 6, 4) if trans_a else (2, 4, 6)).astype(np.float32)
    b = rng.standard_normal((5, 6) if trans_b else (6, 5)).astype(np.float32)
    model = _model(
        "FusedMatMul", [("a", a), ("b", b)], 1, ("a", "b"), alpha=alpha, transA=trans_a, transB=trans_b
    )
    _assert_same(_run(model, {"a": a, "b": b}), rtol=1e-6)


@pytest.mark.parametrize("segments", [False, True])
@pytest.mark.parametrize("positions", [False, True])
def test_embed_layer_normalization(segments: bool, positions: bool):
    """Every output (the normalized sum, the mask index, the sum), with and without segments and
    given position ids."""
    rng = np.random.default_rng(RNG_SEED)
    ids = rng.integers(0, 20, (2, 6)).astype(np.int32)
    mask = np.ones((2, 6), np.int32)
    mask[1, 4:] = 0
    inputs = [
        ("ids", ids),
        ("segment_ids", rng.integers(0, 2, (2, 6)).astype(np.int32) if segments else None),
        ("words", rng.standard_normal((20, 16)).astype(np.float32)),
        ("positions", rng.standard_normal((8, 16)).astype(np.float32)),
        ("segments", rng.standard_normal((2, 16)).astype(np.float32) if segments else None),
        ("gamma", rng.standard_normal(16).astype(np.float32)),
        ("beta", rng.standard_normal(16).astype(np.float32)),
        ("mask", mask),
        ("position_ids", np.array([[5, 4, 3, 2, 1, 0]], np.int32) if positions else None),
    ]
    feeds = {"ids": ids, "mask": mask}
    model = _model("EmbedLayerNormalization", inputs, 3, tuple(feeds), epsilon=1e-5)
    _assert_same(_run(model, feeds), rtol=1e-6)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_dynamic_quantize_lstm(direction: str):
    """Sequence lengths, initial states, peepholes and per-channel int8 weights, two rows (with a
    thread per row onnxruntime quantizes each row's hidden state alone, as SpawnML does)."""
    rng = np.random.default_rng(RNG_SEED)
    count = 2 if direction == "bidirectional" else 1
    steps, batch, width, hidden = 6, 2, 5, 4
    x = rng.standard_normal((steps, batch, width)).astype(np.float32)

    def weight_scale() -> np.ndarray:
        return (rng.random((count, 4 * hidden)) * 0.02 + 0.005).astype(np.float32)

    inputs = [
        ("x", x),
        ("w", int8_weights(rng, (count, width, 4 * hidden))),
        ("r", int8_weights(rng, (count, hidden, 4 * hidden))),
        ("b", rng.standard_normal((count, 8 * hidden)).astype(np.float32)),
        ("lengths", np.array([steps, 3], np.int32)),
        ("h0", rng.standard_normal((count, batch, hidden)).astype(np.float32)),
        ("c0", rng.standard_normal((count, batch, hidden)).astype(np.float32)),
        ("p", rng.standard_normal((count, 3 * hidden)).astype(np.float32)),
        ("w_scale", weight_scale()),
        ("w_zero", np.zeros((count, 4 * hidden), np.int8)),
        ("r_scale", weight_scale()),
        ("r_zero", np.zeros((count, 4 * hidden), np.int8)),
    ]
    model = _model("DynamicQuantizeLSTM", inputs, 3, ("x",), hidden_size=hidden, direction=direction)
    _assert_same(_run(model, {"x": x}, threads=batch), rtol=1e-6)


def test_dynamic_quantize_lstm_refuses_other_activations():
    rng = np.random.default_rng(RNG_SEED)
    x = rng.standard_normal((2, 1, 3)).astype(np.float32)
    inputs = [
        ("x", x),
        ("w", np.zeros((1, 3, 8), np.int8)),
        ("r", np.zeros((1, 2, 8), np.int8)),
        *[(name, None) for name in ("b", "lengths", "h0", "c0", "p")],
        ("w_scale", np.ones(1, np.float32)),
        ("w_zero", np.zeros(1, np.int8)),
        ("r_scale", np.ones(1, np.float32)),
        ("r_zero", np.zeros(1, np.int8)),
    ]
    model = _model(
        "DynamicQuantizeLSTM", inputs, 3, ("x",), hidden_size=2, activations=["Sigmoid", "Relu", "Tanh"]
    )
    with pytest.raises(spawnml.errors.UnsupportedOperatorError, match="not LSTM's defaults"):
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])


@pytest.mark.parametrize(("op", "attrs"), [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.15})])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize(("x_scale", "y_scale"), [(0.05, 1 / 255), (0.11, 0.02), (0.013, 0.007)])
def test_lookup_activations_every_value(op: str, attrs: dict, dtype: type, x_scale: float, y_scale: float):
    """Every value of the 8-bit type through onnxruntime's table."""
    info = np.iinfo(dtype)
    x = np.arange(info.min, info.max + 1).astype(dtype).reshape(16, 16)
    zero = 0 if dtype == np.uint8 else -128
    inputs = [
        ("x", x),
        ("x_scale", _scalar(x_scale, np.float32)),
        ("x_zero", _scalar(zero + 128 if op == "QLinearLeakyRelu" else zero + 100, dtype)),
        ("y_scale", _scalar(y_scale, np.float32)),
        ("y_zero", _scalar(zero + 40, dtype)),
    ]
    _assert_same(_run(_model(op, inputs, 1, ("x",), **attrs), {"x": x}))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_global_average_pool(dtype: type):
    rng = np.random.default_rng(RNG_SEED)
    x = _quantized(rng, (2, 5, 7, 9), dtype)
    zero = 17 if dtype == np.uint8 else -9
    inputs = [
        ("x", x),
        ("x_scale", _scalar(0.05, np.float32)),
        ("x_zero", _scalar(zero, dtype)),
        ("y_scale", _scalar(0.01, np.float32)),
        ("y_zero", _scalar(zero, dtype)),
    ]
    _assert_same(_run(_model("QLinearGlobalAveragePool", inputs, 1, ("x",)), {"x": x}))


@pytest.mark.parametrize("unidirectional", [0, 1])
@pytest.mark.parametrize("mask", [False, True])
def test_qattention(unidirectional: int, mask: bool):
    rng = np.random.default_rng(RNG_SEED)
    batch, length, width, heads = 2, 5, 8, 2
    x = _quantized(rng, (batch, length, width), np.uint8)
    inputs = [
        ("x", x),
        ("w", int8_weights(rng, (width, 3 * width))),
        ("bias", rng.standard_normal(3 * width).astype(np.float32)),
        ("x_scale", _scalar(0.02, np.float32)),
        ("w_scale", _scalar(0.01, np.float32)),
        ("mask", np.array([5, 3], np.int32) if mask else None),
        ("x_zero", _scalar(128, np.uint8)),
        ("w_zero", _scalar(0, np.int8)),
    ]
    model = _model("QAttention", inputs, 1, ("x",), num_heads=heads, unidirectional=unidirectional)
    _assert_same(_run(model, {"x": x}), rtol=1e-6)


@pytest.mark.parametrize("mask", ["none", "lengths", "raw"])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_multi_head_attention(mask: str, cross: bool):
    """Separate Q, K and V with their bias, a key padding mask and an attention bias; keys of
    another length than the queries for cross-attention."""
    rng = np.random.default_rng(RNG_SEED)
    batch, queries, width, heads = 2, 4, 8, 2
    keys = 6 if cross else queries
    masks = {
        "none": None,
        "lengths": np.array([keys, keys - 2], np.int32),
        "raw": (rng.random((batch, keys)) > 0.3).astype(np.int32),
    }
    inputs = [
        ("q", rng.standard_normal((batch, queries, width)).astype(np.float32)),
        ("k", rng.standard_normal((batch, keys, width)).astype(np.float32)),
        ("v", rng.standard_normal((batch, keys, width)).astype(np.float32)),
        ("bias", rng.standard_normal(3 * width).astype(np.float32)),
        ("mask", masks[mask]),
        ("attention_bias", rng.standard_normal((1, heads, queries, keys)).astype(np.float32)),
    ]
    feeds = {name: value for name, value in inputs[:3]}
    model = _model("MultiHeadAttention", inputs, 1, tuple(feeds), num_heads=heads)
    _assert_same(_run(model, feeds), rtol=1e-6)


def test_multi_head_attention_refuses_bias_with_packed_inputs():
    x = np.zeros((1, 2, 2, 3, 4), np.float32)
    inputs = [("qkv", x), ("k", None), ("v", None), ("bias", np.zeros(24, np.float32))]
    model = _model("MultiHeadAttention", inputs, 1, ("qkv",), num_heads=2)
    with pytest.raises(spawnml.errors.UnsupportedOperatorError, match="packed query/key/value"):
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("layout", ["BSD", "BNSH"])
@pytest.mark.parametrize("positions", ["ids", "offset"])
@pytest.mark.parametrize("partial", [False, True], ids=["whole", "partial"])
def test_rotary_embedding(interleaved: int, layout: str, positions: str, partial: bool):
    """Rotary embeddings over whole or partial heads, from position ids or an offset."""
    rng = np.random.default_rng(RNG_SEED)
    batch, length, heads, head = 2, 5, 3, 8
    rotary = 4 if partial else head
    x = rng.standard_normal(
        (batch, length, heads * head) if layout == "BSD" else (batch, heads, length, head)
    )
    ids = {"ids": rng.integers(0, 16, (batch, length)), "offset": np.array([3])}[positions]
    angles = np.arange(16)[:, None] * rng.random(rotary // 2)[None, :]
    inputs = [
        ("x", x.astype(np.float32)),
        ("position_ids", ids.astype(np.int64)),
        ("cos", np.cos(angles).astype(np.float32)),
        ("sin", np.sin(angles).astype(np.float32)),
    ]
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rotary if partial else 0}
    if partial:  # onnxruntime needs the head count to cut a partial rotation out of each head
        attrs["num_heads"] = heads
    feeds = {"x": inputs[0][1]}
    _assert_same(_run(_model("RotaryEmbedding", inputs, 1, ("x",), **attrs), feeds), rtol=1e-6)


def _block_params(rng: np.random.Generator, rows: int, blocks: int, scale_type: type) -> np.ndarray:
    return (rng.random((rows, blocks)) * 0.1 + 0.01).astype(scale_type)


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("zero_points", [False, True])
@pytest.mark.parametrize("scale_type", [np.float32, np.float16])
def test_gather_block_quantized_uint8(bits: int, zero_points: bool, scale_type: type):
    """Rows of a uint8 table packing ``8 / bits`` values a byte, in blocks of 16 along the row."""
    rng = np.random.default_rng(RNG_SEED)
    rows, width, block = 10, 32, 16
    per_byte = 8 // bits
    data = rng.integers(0, 256, (rows, width // per_byte)).astype(np.uint8)
    zeros = rng.integers(0, 256, (rows, -(-(width // block) // per_byte))).astype(np.uint8)
    indices = np.array([[1, 9, 4], [3, 0, 9]], np.int64)
    inputs = [
        ("data", data),
        ("indices", indices),
        ("scales", _block_params(rng, rows, width // block, scale_type)),
        ("zero_points", zeros if zero_points else None),
    ]
    model = _model("GatherBlockQuantized", inputs, 1, ("indices",), bits=bits, block_size=block)
    _assert_same(_run(model, {"indices": indices}))


@pytest.mark.parametrize(("gather_axis", "quantize_axis"), [(0, 1), (1, 0), (0, 0)])
@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_gather_block_quantized_4bit(gather_axis: int, quantize_axis: int, dtype: str):
    """An int4 or uint4 table gathered along either axis, in blocks of 16 along either."""
    rng = np.random.default_rng(RNG_SEED)
    narrow = np.dtype(getattr(ml_dtypes, dtype))
    info = ml_dtypes.iinfo(narrow)
    data = rng.integers(info.min, info.max + 1, (32, 48)).astype(narrow)
    shape = (2, 48) if quantize_axis == 0 else (32, 3)
    indices = np.array([5, 0, 31, 7], np.int32)
    inputs = [
        ("data", data),
        ("indices", indices),
        ("scales", (rng.random(shape) * 0.1 + 0.01).astype(np.float32)),
        ("zero_points", rng.integers(info.min, info.max + 1, shape).astype(narrow)),
    ]
    model = _model(
        "GatherBlockQuantized",
        inputs,
        1,
        ("indices",),
        block_size=16,
        gather_axis=gather_axis,
        quantize_axis=quantize_axis,
    )
    _assert_same(_run(model, {"indices": indices}))


@pytest.mark.parametrize(("block", "scales_shape"), [(0, (10, 1)), (16, (10, 2)), (16, (1, 2))])
def test_gather_block_quantized_float8(block: int, scales_shape: tuple[int, int]):
    """FP8 tables only scaled: a scale per row (block 0), per block, or shared by every row."""
    rng = np.random.default_rng(RNG_SEED)
    data = rng.standard_normal((10, 32)).astype(ml_dtypes.float8_e4m3fn)
    indices = np.array([2, 7, 7], np.int64)
    inputs = [
        ("data", data),
        ("indices", indices),
        ("scales", (rng.random(scales_shape) + 0.5).astype(np.float32)),
    ]
    model = _model("GatherBlockQuantized", inputs, 1, ("indices",), block_size=block)
    _assert_same(_run(model, {"indices": indices}))
