"""LinearAttention and FlexAttention on every GPU backend, on shapes past what the ONNX node tests
exercise (more value columns than one workgroup runs, dozens of steps, grouped heads, per-head and
per-key decay, a shared beta, a past state; query and key lengths past one workgroup, score_mod and
prob_mod subgraphs), against onnx's reference evaluator. Tolerances: 1e-4 relative and 1e-5
absolute for float32 (sums of up to 90 terms in another order, a recurrence of 40 steps); 2e-3
for float16 results (the reference rounds Q and K scaled, and the scores, to float16 where the GPU
keeps float32). Each run is checked to read nothing back from the device before its outputs.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
import spawnml
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from spawnml import plugins

from tests.backends import GPU_BACKENDS, backend_or_skip

rng = np.random.default_rng(27)
PREVIEW = "ai.onnx.preview"
FLOAT32 = {"rtol": 1e-4, "atol": 1e-5}
FLOAT16 = {"rtol": 2e-3, "atol": 2e-3}


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def one_node(op: str, inputs: dict, outputs: int, domain: str = "", **attrs) -> onnx.ModelProto:
    """A model of one ``op`` node over ``inputs`` (``None`` leaves an input out)."""
    names = [n if v is not None else "" for n, v in inputs.items()]
    node = helper.make_node(op, names, [f"y{i}" for i in range(outputs)], domain=domain or None, **attrs)
    feeds = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in inputs.items()
        if v is not None
    ]
    results = [helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None) for i in range(outputs)]
    opsets = [helper.make_opsetid("", 27 if op == "LinearAttention" else 26)]
    opsets += [helper.make_opsetid(PREVIEW, 1)] if domain else []
    graph = helper.make_graph([node], op, feeds, results)
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def check(provider: str, model: onnx.ModelProto, inputs: dict, tolerance: dict) -> None:
    """Run ``model`` whole on ``provider`` with no read-back before the outputs; compare with onnx."""
    feeds = {n: v for n, v in inputs.items() if v is not None}
    session = spawnml.InferenceSession(model.SerializeToString(), providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    traffic = plugins.backends()[provider].traffic
    before = traffic().bytes_from_device
    outputs = session.run_with_tensors(None, feeds)
    assert traffic().bytes_from_device == before
    want = ReferenceEvaluator(model).run(None, feeds)
    for got, expected in zip((np.from_dlpack(o) for o in outputs), want, strict=True):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), **tolerance)


# --- LinearAttention ---------------------------------------------------------------

BATCH, STEPS, KEY, VALUE = 2, 40, 16, 40


def linear_inputs(rule: str, q_heads: int, kv_heads: int, decay: str, beta: int, past: bool, dtype) -> dict:
    key = rng.standard_normal((BATCH, STEPS, kv_heads, KEY))
    key /= np.linalg.norm(key, axis=-1, keepdims=True)
    decay_size = kv_heads if decay == "head" else kv_heads * KEY
    inputs = {
        "query": rng.standard_normal((BATCH, STEPS, q_heads * KEY)),
        "key": key.reshape(BATCH, STEPS, -1),
        "value": rng.standard_normal((BATCH, STEPS, kv_heads * VALUE)),
        "past_state": rng.standard_normal((BATCH, kv_heads, KEY, VALUE)) * 0.1 if past else None,
        "decay": -np.abs(rng.standard_normal((BATCH, STEPS, decay_size))) * 0.1 if "gated" in rule else None,
        "beta": rng.random((BATCH, STEPS, beta)) if "delta" in rule else None,
    }
    return {name: None if x is None else x.astype(dtype) for name, x in inputs.items()}


@pytest.mark.parametrize(
    "rule, q_heads, kv_heads, decay, beta, past",
    [
        ("linear", 4, 4, "key", 1, False),
        ("gated", 4, 2, "head", 1, True),
        ("gated", 2, 2, "key", 1, False),
        ("delta", 6, 3, "key", 3, True),
        ("gated_delta", 8, 2, "key", 2, True),
        ("gated_delta", 4, 1, "head", 1, False),
    ],
)
def test_linear_attention_matches_onnx(provider, rule, q_heads, kv_heads, decay, beta, past):
    inputs = linear_inputs(rule, q_heads, kv_heads, decay, beta, past, np.float32)
    attrs = {"update_rule": rule, "q_num_heads": q_heads, "kv_num_heads": kv_heads}
    check(provider, one_node("LinearAttention", inputs, 2, **attrs), inputs, FLOAT32)


def test_linear_attention_float16_with_float32_state(provider):
    inputs = linear_inputs("gated_delta", 4, 2, "key", 2, False, np.float16)
    inputs["past_state"] = (rng.standard_normal((BATCH, 2, KEY, VALUE)) * 0.1).astype(np.float32)
    attrs = {"update_rule": "gated_delta", "q_num_heads": 4, "kv_num_heads": 2, "scale": 0.2}
    check(provider, one_node("LinearAttention", inputs, 2, **attrs), inputs, FLOAT16)


# --- FlexAttention -----------------------------------------------------------------


def modifier(name: str, nodes: list, constants: dict[str, float]) -> onnx.GraphProto:
    """A subgraph from ``x`` to ``out`` over float32 scores or probabilities."""
    return helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "H", "L", "S"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["B", "H", "L", "S"])],
        [helper.make_tensor(n, TensorProto.FLOAT, [], [v]) for n, v in constants.items()],
    )


SOFT_CAP = modifier(
    "soft_cap",
    [
        helper.make_node("Div", ["x", "cap"], ["scaled"]),
        helper.make_node("Tanh", ["scaled"], ["capped"]),
        helper.make_node("Mul", ["capped", "cap"], ["out"]),
    ],
    {"cap": 2.0},
)
HALVED = modifier("halved", [helper.make_node("Mul", ["x", "half"], ["out"])], {"half": 0.5})


@pytest.mark.parametrize(
    "heads, kv_heads, q_len, kv_len, v_size, attrs",
    [
        (4, 4, 70, 90, 24, {}),
        (8, 2, 33, 65, 40, {"scale": 0.3}),
        (6, 1, 65, 17, 8, {"score_mod": SOFT_CAP}),
        (4, 2, 40, 70, 16, {"score_mod": SOFT_CAP, "prob_mod": HALVED}),
    ],
)
def test_flex_attention_matches_onnx(provider, heads, kv_heads, q_len, kv_len, v_size, attrs):
    inputs = {
        "Q": rng.standard_normal((2, heads, q_len, 32)).astype(np.float32),
        "K": rng.standard_normal((2, kv_heads, kv_len, 32)).astype(np.float32),
        "V": rng.standard_normal((2, kv_heads, kv_len, v_size)).astype(np.float32),
    }
    check(provider, one_node("FlexAttention", inputs, 1, PREVIEW, **attrs), inputs, FLOAT32)


def test_flex_attention_float16(provider):
    inputs = {name: rng.random((1, 4, 70, 16)).astype(np.float16) for name in "QKV"}
    check(provider, one_node("FlexAttention", inputs, 1, PREVIEW), inputs, FLOAT16)


# --- refused at load ---------------------------------------------------------------

QKV = {name: np.zeros((1, 2, 3, 4), np.float32) for name in "QKV"}
PACKED = {name: np.zeros((1, 3, 8), np.float32) for name in ("query", "key", "value")}


@pytest.mark.parametrize(
    "model, reason",
    [
        (one_node("FlexAttention", QKV, 1, PREVIEW, softmax_precision=10), "softmax_precision=10"),
        (one_node("FlexAttention", {n: v.astype(np.float64) for n, v in QKV.items()}, 1, PREVIEW), "double"),
        (
            one_node("LinearAttention", PACKED, 2, update_rule="fancy", q_num_heads=2, kv_num_heads=2),
            "update_rule='fancy'",
        ),
        (
            one_node("LinearAttention", PACKED, 2, update_rule="gated", q_num_heads=2, kv_num_heads=2),
            "needs decay",
        ),
        (
            one_node("LinearAttention", PACKED, 2, update_rule="linear", q_num_heads=3, kv_num_heads=2),
            "q_num_heads=3 is not a positive multiple of kv_num_heads=2",
        ),
    ],
)
def test_refused_at_load(provider, model, reason):
    with pytest.raises(spawnml.UnsupportedOperatorError, match=f"{provider}: .*{re.escape(reason)}"):
        spawnml.InferenceSession(model.SerializeToString(), providers=[provider])
