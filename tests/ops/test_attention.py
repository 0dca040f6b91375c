"""Attention and transformer operators against onnxruntime, and against onnx's reference
evaluator or the ONNX node-case data where onnxruntime cannot run them."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnx.backend.test.loader
import pytest
import spawnml
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from spawnml.ir import Node
from spawnml.ops.defs.attention import PREVIEW, SCHEMAS
from spawnml.ops.registry import OperatorRegistry
from spawnml.ops.schema import InferenceContext, TensorType

from tests.ops.conftest import make_model

#: float32 attention against onnxruntime: matrix products and a softmax over a few keys.
FLOAT = {"rtol": 1e-4, "atol": 1e-5}
#: float16 inputs against onnxruntime, which may round intermediate results to float16.
HALF = {"rtol": 2e-3, "atol": 2e-3}

rng = np.random.default_rng(0)


def randn(*shape: int, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def one_node(op: str, inputs: dict, outputs: list[str] | int = 1, opset: int = 23, domain: str = "", **attrs):
    """A one-node model and its feeds; ``None`` inputs and ``''`` outputs are omitted."""
    feeds = {name: value for name, value in inputs.items() if value is not None}
    names = [f"y{i}" for i in range(outputs)] if isinstance(outputs, int) else outputs
    model = make_model(op, feeds, names, opset, domain, **attrs)
    node_inputs = [name if value is not None else "" for name, value in inputs.items()]
    while not node_inputs[-1]:
        node_inputs.pop()
    model.graph.node[0].input[:] = node_inputs
    produced = [value for value in model.graph.output if value.name]
    del model.graph.output[:]
    model.graph.output.extend(produced)
    model.ir_version = 10
    return model, feeds


def check_reference(model, feeds, rtol: float, atol: float) -> None:
    """Compare with onnx's reference evaluator."""
    ours = spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
    reference = ReferenceEvaluator(model).run(None, feeds)
    for got, want in zip(ours, reference, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


# --- Attention ---------------------------------------------------------------------

BATCH, Q_LEN, KV_LEN, PAST, HEAD = 2, 4, 6, 3, 8


def attention_inputs(
    q_heads: int = 4,
    kv_heads: int = 4,
    packed: bool = False,
    v_head: int = HEAD,
    mask: tuple[int, ...] | None = None,
    boolean: bool = False,
    past: bool = False,
    dtype=np.float32,
) -> dict[str, np.ndarray | None]:
    """Q, K, V (4-D, or 3-D when ``packed``), a mask of shape ``mask`` and a key/value cache."""

    def tensor(heads: int, length: int, size: int) -> np.ndarray:
        x = randn(BATCH, heads, length, size, dtype=dtype)
        return x.transpose(0, 2, 1, 3).reshape(BATCH, length, heads * size) if packed else x

    if mask is None:
        attn_mask = None
    elif boolean:
        attn_mask = rng.random(mask) < 0.7
    else:
        attn_mask = randn(*mask, dtype=dtype)
    return {
        "q": tensor(q_heads, Q_LEN, HEAD),
        "k": tensor(kv_heads, KV_LEN, HEAD),
        "v": tensor(kv_heads, KV_LEN, v_head),
        "attn_mask": attn_mask,
        "past_key": randn(BATCH, kv_heads, PAST, HEAD, dtype=dtype) if past else None,
        "past_value": randn(BATCH, kv_heads, PAST, v_head, dtype=dtype) if past else None,
    }


def attention(check, inputs: dict, outputs=1, opset: int = 23, tolerance=FLOAT, **attrs):
    return check(*one_node("Attention", inputs, outputs, opset, **attrs), **tolerance)


HEADS = [(4, 4), (4, 2), (4, 1)]  # multi-head, grouped-query, multi-query


@pytest.mark.parametrize("q_heads, kv_heads", HEADS)
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("v_head", [HEAD, 5])
def test_attention_heads(check, q_heads, kv_heads, packed, v_head):
    attrs = {"q_num_heads": q_heads, "kv_num_heads": kv_heads} if packed else {}
    attention(check, attention_inputs(q_heads, kv_heads, packed, v_head), **attrs)


@pytest.mark.parametrize("scale", [0.01, 0.5])
@pytest.mark.parametrize("softcap", [0.0, 2.0])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_scale_softcap_causal(check, scale, softcap, causal):
    attention(check, attention_inputs(4, 2), scale=scale, softcap=softcap, is_causal=causal)


MASKS = [(Q_LEN, KV_LEN), (BATCH, 1, Q_LEN, KV_LEN), (BATCH, 4, Q_LEN, KV_LEN), (1, Q_LEN, KV_LEN)]


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("boolean", [False, True])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_masks(check, mask, boolean, causal):
    inputs = attention_inputs(4, 2, mask=mask, boolean=boolean)
    attention(check, inputs, is_causal=causal)


#: Masks onnxruntime refuses: rank 1, and shorter than the keys (padded with -inf). The
#: reference evaluator takes a rank-1 mask only without is_causal.
SHORT_MASKS = [
    ((KV_LEN,), 0),
    ((Q_LEN, KV_LEN - 2), 0),
    ((Q_LEN, KV_LEN - 2), 1),
    ((BATCH, 1, Q_LEN, 3), 0),
    ((BATCH, 1, Q_LEN, 3), 1),
]


@pytest.mark.parametrize("mask, causal", SHORT_MASKS)
@pytest.mark.parametrize("boolean", [False, True])
def test_attention_rank_1_and_short_masks(mask, causal, boolean):
    inputs = attention_inputs(4, 2, mask=mask, boolean=boolean)
    check_reference(*one_node("Attention", inputs, 1, 23, is_causal=causal), **FLOAT)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("q_heads, kv_heads", HEADS)
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_past_key_value(check, packed, q_heads, kv_heads, causal):
    inputs = attention_inputs(q_heads, kv_heads, packed, mask=(Q_LEN, PAST + KV_LEN), past=True)
    attrs = {"q_num_heads": q_heads, "kv_num_heads": kv_heads} if packed else {}
    attention(check, inputs, ["y", "present_key", "present_value"], is_causal=causal, **attrs)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("softcap", [0.0, 1.5])
def test_attention_qk_matmul_output(check, mode, softcap):
    inputs = attention_inputs(4, 2, mask=(Q_LEN, KV_LEN))
    attention(check, inputs, ["y", "", "", "qk"], qk_matmul_output_mode=mode, softcap=softcap)


@pytest.mark.parametrize("precision", [1, 11])
@pytest.mark.parametrize("mode", [0, 3])
def test_attention_softmax_precision(check, precision, mode):
    inputs = attention_inputs(4, 2, mask=(Q_LEN, KV_LEN))
    attention(check, inputs, ["y", "", "", "qk"], softmax_precision=precision, qk_matmul_output_mode=mode)


def test_attention_fully_masked_rows(check):
    inputs = attention_inputs(4, 2, mask=(Q_LEN, KV_LEN), boolean=True)
    inputs["attn_mask"][1] = False
    attention(check, inputs, ["y", "", "", "qk"], qk_matmul_output_mode=3)


@pytest.mark.parametrize("lengths", [[6, 6], [4, 2], [6, 3]])
@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("mask", [None, (BATCH, 1, Q_LEN, KV_LEN)])
def test_attention_nonpad_kv_seqlen(check, lengths, causal, mask):
    inputs = attention_inputs(4, 2, mask=mask, boolean=True)
    inputs.update(past_key=None, past_value=None, nonpad_kv_seqlen=np.asarray(lengths, np.int64))
    attention(check, inputs, opset=24, is_causal=causal)


WINDOWS = [(2, -1, 1), (0, 0, 1), (2, -1, 0), (1, 2, 0), (0, 0, 0), (-1, 1, 0)]  # left, right, is_causal


@pytest.mark.parametrize("left, right, causal", WINDOWS)
@pytest.mark.parametrize("past", [False, True])
def test_attention_windows(check, left, right, causal, past):
    inputs = attention_inputs(4, 2, past=past)
    outputs = ["y", "present_key", "present_value"] if past else 1
    attention(
        check, inputs, outputs, opset=25, is_causal=causal, left_window_size=left, right_window_size=right
    )


@pytest.mark.parametrize("opset", [23, 24, 25])
def test_attention_opsets(check, opset):
    attention(check, attention_inputs(4, 2, mask=(Q_LEN, KV_LEN)), opset=opset, is_causal=1)


def test_attention_float16(check):
    inputs = attention_inputs(4, 2, mask=(Q_LEN, PAST + KV_LEN), past=True, dtype=np.float16)
    attention(check, inputs, ["y", "present_key", "present_value"], tolerance=HALF, is_causal=1)


def test_attention_float64():
    """The operator's definition computes the scale in float32, onnx's reference evaluator
    in float64: they agree to float32's precision."""
    inputs = attention_inputs(4, 2, mask=(Q_LEN, KV_LEN))
    inputs = {name: None if value is None else value.astype(np.float64) for name, value in inputs.items()}
    model, feeds = one_node(
        "Attention", inputs, ["y", "", "", "qk"], 23, is_causal=1, qk_matmul_output_mode=2
    )
    check_reference(model, feeds, rtol=1e-6, atol=1e-7)


#: The 16-bit ONNX node cases, computed by the reference in 16-bit arithmetic throughout
#: (softmax sums included) while this kernel accumulates in float32: they agree to within
#: two units in the last place of the output type, closer than their stored rtol of 1e-3
#: allows for bfloat16.
SIXTEEN_BIT_CASES = [
    "test_attention_4d_causal_bf16",
    "test_attention_4d_causal_fp16",
    "test_attention_4d_padded_kv_bf16",
    "test_attention_4d_causal_padded_kv_bf16",
    "test_attention_4d_attn_mask_causal_bf16",
    "test_attention_3d_causal_bf16",
]


@functools.cache
def node_cases() -> dict[str, Any]:
    """The ONNX backend node cases by name."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # some generators overflow on purpose
        return {case.name: case for case in onnx.backend.test.loader.load_model_tests(kind="node")}


@pytest.mark.parametrize("name", SIXTEEN_BIT_CASES)
def test_attention_16_bit_node_cases(name):
    case = node_cases()[name]
    session = spawnml.InferenceSession(case.model.SerializeToString(), providers=["cpu"])
    for inputs, expected in case.data_sets:
        names = [value.name for value in case.model.graph.input]
        (got,) = session.run(None, dict(zip(names, inputs, strict=False)))
        (want,) = expected
        assert got.dtype == want.dtype and got.shape == want.shape
        ulp = float(ml_dtypes.finfo(want.dtype).eps)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2 * ulp, atol=1e-7)


# --- FlexAttention -----------------------------------------------------------------


def modifier(name: str, op: str, constant: float) -> onnx.GraphProto:
    """A modifier subgraph ``out = op(x, constant)`` over a rank-4 float tensor."""
    value = helper.make_tensor("c", TensorProto.FLOAT, [], [constant])
    return helper.make_graph(
        [helper.make_node(op, ["x", "c"], ["out"])],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "H", "L", "S"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["B", "H", "L", "S"])],
        [value],
    )


def flex_model(inputs: dict, **attrs):
    model, feeds = one_node("FlexAttention", inputs, 1, 26, domain=PREVIEW, **attrs)
    return model, feeds


@pytest.mark.parametrize("q_heads, kv_heads", HEADS)
@pytest.mark.parametrize("v_head", [HEAD, 5])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_flex_attention(q_heads, kv_heads, v_head, scale):
    inputs = attention_inputs(q_heads, kv_heads, v_head=v_head)
    inputs = {name: inputs[name] for name in "qkv"}
    attrs = {} if scale is None else {"scale": scale}
    check_reference(*flex_model(inputs, **attrs), **FLOAT)


@pytest.mark.parametrize(
    "mods",
    [
        {"score_mod": ("Add", 0.5)},
        {"score_mod": ("Mul", 2.0)},
        {"prob_mod": ("Mul", 0.5)},
        {"score_mod": ("Sub", 1.0), "prob_mod": ("Add", 0.1)},
    ],
)
def test_flex_attention_modifiers(mods):
    inputs = attention_inputs(4, 2)
    attrs = {name: modifier(name, op, constant) for name, (op, constant) in mods.items()}
    check_reference(*flex_model({name: inputs[name] for name in "qkv"}, **attrs), **FLOAT)


@pytest.mark.parametrize("dtype, precision, tolerance", [(np.float64, None, 1e-12), (np.float16, 1, 2e-3)])
def test_flex_attention_types(dtype, precision, tolerance):
    inputs = attention_inputs(4, 2, dtype=dtype)
    attrs = {} if precision is None else {"softmax_precision": precision}
    check_reference(
        *flex_model({name: inputs[name] for name in "qkv"}, **attrs), rtol=tolerance, atol=tolerance
    )


# --- LinearAttention ---------------------------------------------------------------

STEPS, KEY, VALUE = 5, 4, 3


def linear_inputs(
    rule: str,
    q_heads: int = 4,
    kv_heads: int = 2,
    per_key_decay: bool = True,
    shared_beta: bool = False,
    past: bool = False,
    dtype=np.float32,
) -> dict[str, np.ndarray | None]:
    key = randn(BATCH, STEPS, kv_heads, KEY)
    key /= np.linalg.norm(key, axis=-1, keepdims=True)
    decay_size = kv_heads * KEY if per_key_decay else kv_heads
    inputs = {
        "query": randn(BATCH, STEPS, q_heads * KEY),
        "key": key.reshape(BATCH, STEPS, -1),
        "value": randn(BATCH, STEPS, kv_heads * VALUE),
        "past_state": randn(BATCH, kv_heads, KEY, VALUE) if past else None,
        "decay": -np.abs(randn(BATCH, STEPS, decay_size)) * 0.3 if "gated" in rule else None,
        "beta": rng.random((BATCH, STEPS, 1 if shared_beta else kv_heads)) if "delta" in rule else None,
    }
    return {name: None if value is None else value.astype(dtype) for name, value in inputs.items()}


def linear_attention(check, inputs: dict, rule: str, q_heads=4, kv_heads=2, tolerance=FLOAT, **attrs):
    model = one_node(
        "LinearAttention",
        inputs,
        ["output", "present_state"],
        27,
        update_rule=rule,
        q_num_heads=q_heads,
        kv_num_heads=kv_heads,
        **attrs,
    )
    return check(*model, **tolerance)


RULES = ["linear", "gated", "delta", "gated_delta"]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("q_heads, kv_heads", [(2, 2), (4, 2), (4, 1)])
@pytest.mark.parametrize("past", [False, True])
def test_linear_attention(check, rule, q_heads, kv_heads, past):
    inputs = linear_inputs(rule, q_heads, kv_heads, past=past)
    linear_attention(check, inputs, rule, q_heads, kv_heads)


@pytest.mark.parametrize("rule", ["gated", "gated_delta"])
@pytest.mark.parametrize("shared_beta", [False, True])
def test_linear_attention_gate_shapes(check, rule, shared_beta):
    inputs = linear_inputs(rule, per_key_decay=False, shared_beta=shared_beta)
    linear_attention(check, inputs, rule, scale=0.7)


def test_linear_attention_float16(check):
    linear_attention(
        check, linear_inputs("gated_delta", past=True, dtype=np.float16), "gated_delta", tolerance=HALF
    )


# --- RotaryEmbedding ---------------------------------------------------------------

SEQUENCE, POSITIONS = 5, 12


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary_dim", [0, 4])
@pytest.mark.parametrize("position_ids", [False, True])
def test_rotary_embedding(check, packed, interleaved, rotary_dim, position_ids):
    heads, size = 3, 8
    half = (rotary_dim or size) // 2
    x = randn(BATCH, SEQUENCE, heads * size) if packed else randn(BATCH, heads, SEQUENCE, size)
    angles = randn(POSITIONS, half) if position_ids else randn(BATCH, SEQUENCE, half)
    inputs = {
        "x": x,
        "cos": np.cos(angles),
        "sin": np.sin(angles),
        "position_ids": rng.integers(0, POSITIONS, (BATCH, SEQUENCE)) if position_ids else None,
    }
    attrs = {"num_heads": heads} if packed else {}
    model = one_node(
        "RotaryEmbedding", inputs, interleaved=interleaved, rotary_embedding_dim=rotary_dim, **attrs
    )
    check(*model, **FLOAT)


def test_rotary_embedding_float16(check):
    angles = randn(POSITIONS, 4)
    inputs = {
        "x": randn(BATCH, 2, SEQUENCE, 8, dtype=np.float16),
        "cos": np.cos(angles).astype(np.float16),
        "sin": np.sin(angles).astype(np.float16),
        "position_ids": rng.integers(0, POSITIONS, (BATCH, SEQUENCE)),
    }
    check(*one_node("RotaryEmbedding", inputs), **HALF)


# --- RMSNormalization, Swish, SwiGLU -----------------------------------------------


@pytest.mark.parametrize("shape, axis", [((4, 6), -1), ((2, 3, 8), -1), ((2, 3, 8), 1), ((2, 3, 4, 5), 0)])
@pytest.mark.parametrize("epsilon", [1e-5, 0.1])
def test_rms_normalization(check, shape, axis, epsilon):
    normalized = shape[axis:]
    inputs = {"x": randn(*shape), "scale": randn(*normalized)}
    check(*one_node("RMSNormalization", inputs, axis=axis, epsilon=epsilon), **FLOAT)


@pytest.mark.parametrize("dtype, tolerance", [(np.float16, HALF), (np.float64, FLOAT)])
def test_rms_normalization_types(check, dtype, tolerance):
    inputs = {"x": randn(3, 16, dtype=dtype), "scale": randn(16, dtype=dtype)}
    check(*one_node("RMSNormalization", inputs), **tolerance)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 1.702])
@pytest.mark.parametrize("dtype, tolerance", [(np.float32, FLOAT), (np.float16, HALF), (np.float64, FLOAT)])
def test_swish(check, alpha, dtype, tolerance):
    check(*one_node("Swish", {"x": randn(3, 7, dtype=dtype) * 4}, opset=24, alpha=alpha), **tolerance)


@pytest.mark.parametrize("alpha", [1.0, 1.702])
@pytest.mark.parametrize("dtype, tolerance", [(np.float32, FLOAT), (np.float16, HALF), (np.float64, FLOAT)])
def test_swiglu(alpha, dtype, tolerance):  # onnxruntime has no SwiGLU yet
    inputs = {"a": randn(3, 7, dtype=dtype) * 4, "b": randn(3, 7, dtype=dtype)}
    check_reference(*one_node("SwiGLU", inputs, opset=28, alpha=alpha), **tolerance)


# --- shape inference ---------------------------------------------------------------

REGISTRY = OperatorRegistry(SCHEMAS)


def infer(op: str, inputs: list, opset: int, domain: str = "", outputs: int = 4, **attrs) -> list[TensorType]:
    schema = REGISTRY.lookup(domain, op, opset)
    node = Node(
        op,
        [f"i{n}" if shape else "" for n, shape in enumerate(inputs)],
        [f"o{n}" for n in range(outputs)],
        attrs,
    )
    types = [None if shape is None else TensorType(np.dtype(np.float32), shape) for shape in inputs]
    return list(schema.infer(InferenceContext(node, opset, schema.resolve_attrs(node), types)))


def shapes(types: list[TensorType]) -> list:
    return [value.shape for value in types]


def test_attention_symbolic_shapes():
    four_d = [("B", 8, "S", 64), ("B", 2, "T", 64), ("B", 2, "T", 32), None, ("B", 2, 5, 64), ("B", 2, 5, 32)]
    assert shapes(infer("Attention", four_d, 23)) == [
        ("B", 8, "S", 32),
        ("B", 2, None, 64),
        ("B", 2, None, 32),
        ("B", 8, "S", None),
    ]
    packed = [("B", "S", 512), ("B", "T", 128), ("B", "T", 64)]
    assert shapes(infer("Attention", packed, 24, q_num_heads=8, kv_num_heads=2)) == [
        ("B", "S", 256),
        ("B", 2, "T", 64),
        ("B", 2, "T", 32),
        ("B", 8, "S", "T"),
    ]


def test_transformer_symbolic_shapes():
    flex = infer("FlexAttention", [("B", 8, "L", 64), ("B", 2, "S", 64), ("B", 2, "S", 16)], 1, PREVIEW)
    assert shapes(flex) == [("B", 8, "L", 16)]
    linear = infer(
        "LinearAttention", [("B", "T", 64), ("B", "T", 32), ("B", "T", 24)], 27, q_num_heads=8, kv_num_heads=4
    )
    assert shapes(linear) == [("B", "T", 48), ("B", 4, 8, 6)]
    assert shapes(infer("RMSNormalization", [("B", "S", 64), (64,)], 23)) == [("B", "S", 64)]
    assert shapes(infer("SwiGLU", [("B", 64), ("B", 64)], 28)) == [("B", 64)]


# --- refused at load ---------------------------------------------------------------

QKV = {"q": randn(1, 2, 3, 4), "k": randn(1, 2, 3, 4), "v": randn(1, 2, 3, 4)}


@pytest.mark.parametrize(
    "op, inputs, opset, attrs",
    [
        ("Attention", QKV, 23, {"qk_matmul_output_mode": 4}),
        ("Attention", QKV, 23, {"softmax_precision": 7}),
        ("Attention", {**QKV, "mask": None, "past_key": randn(1, 2, 1, 4)}, 23, {}),
        ("Attention", QKV, 25, {"left_window_size": -2}),
        (
            "Attention",
            {**QKV, "m": None, "pk": randn(1, 2, 1, 4), "pv": randn(1, 2, 1, 4), "n": np.ones(1, np.int64)},
            24,
            {},
        ),
        ("LinearAttention", QKV, 27, {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "fancy"}),
        ("LinearAttention", QKV, 27, {"q_num_heads": 2, "kv_num_heads": 2}),  # gated_delta needs decay, beta
        ("LinearAttention", QKV, 27, {"q_num_heads": 3, "kv_num_heads": 2, "update_rule": "linear"}),
        ("RMSNormalization", {"x": randn(2, 3), "s": randn(3)}, 23, {"stash_type": 7}),
        ("CausalConvWithState", {"x": randn(1, 2, 3), "w": randn(2, 1, 2)}, 27, {"activation": "gelu"}),
    ],
)
def test_refused_at_load(op, inputs, opset, attrs):
    outputs = 2 if op in ("LinearAttention", "CausalConvWithState") else 1
    model, _ = one_node(op, inputs, outputs, opset, **attrs)
    with pytest.raises(spawnml.UnsupportedOperatorError, match=op):
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])


def test_flex_attention_precision_refused():
    model, _ = flex_model(dict(QKV), softmax_precision=7)
    with pytest.raises(spawnml.UnsupportedOperatorError, match="FlexAttention"):
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])
