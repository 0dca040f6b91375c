"""onnxruntime's attention operators over projected inputs, and GemmFastGelu, BiasAdd and
BiasSoftmax, one node at a time on the CPU backend against onnxruntime's CPU provider.

GroupQueryAttention and MultiHeadAttention run in onnxruntime as written. onnxruntime's CPU
provider has no kernel for MultiHeadAttention's packed Q/K/V and packed K/V forms,
GemmFastGelu, BiasAdd or BiasSoftmax (they are CUDA's and ROCm's); those are compared with
onnxruntime running the same computation in the forms it does run: the packed inputs given
separately, and MatMul, FastGelu, Add and Softmax nodes.

Tolerance: float32 attention sums products in another order than onnxruntime's GEMMs and
softmax, so outputs of magnitude about 1 agree to ``ATOL`` absolute and ``RTOL`` relative
(measured: at most 2.4e-7 absolute, on outputs of magnitude up to 4).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import helper

MS = "com.microsoft"
ATOL, RTOL = 5e-6, 1e-5
FLOAT, INT32 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT32

Feeds = dict[str, np.ndarray]


def node_model(
    op: str, inputs: list[str], outputs: list[str], feeds: Feeds, element: int = FLOAT, **attrs
) -> bytes:
    """A model of one com.microsoft node ``op`` with outputs of ONNX type ``element``; an input
    named ``""`` is left out."""
    node = helper.make_node(op, inputs, outputs, domain=MS, **attrs)
    graph = helper.make_graph(
        [node],
        op,
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
            for name, value in feeds.items()
        ],
        [helper.make_tensor_value_info(name, element, None) for name in outputs if name],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    return model.SerializeToString()


def given_inputs(names: list[str], feeds: Feeds) -> list[str]:
    """``names`` with ``""`` for those not fed, the trailing ones left out."""
    inputs = [name if name in feeds else "" for name in names]
    while not inputs[-1]:
        inputs.pop()
    return inputs


def onnxruntime_run(model: bytes, feeds: Feeds) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def spawnml_run(model: bytes, feeds: Feeds) -> list[np.ndarray]:
    return [
        np.asarray(value) for value in spawnml.InferenceSession(model, providers=["cpu"]).run(None, feeds)
    ]


def assert_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, what
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=what)


def random(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# GroupQueryAttention -------------------------------------------------------------------------

HEAD_SIZE = 32  # onnxruntime rotates a multiple of 16 values of a head, 8 pairs at a time
CACHE_LENGTH = 16


def rotary_caches(rotary_half: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin caches ``[CACHE_LENGTH, rotary_half]`` of the usual frequencies."""
    frequencies = 1 / 10000 ** (np.arange(rotary_half) / rotary_half)
    angles = np.outer(np.arange(CACHE_LENGTH), frequencies)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def gqa_feeds(
    rng: np.random.Generator,
    seqlens_k: list[int],
    length: int,
    total: int,
    cached: int,
    heads: int,
    kv_heads: int,
    packed: bool,
) -> Feeds:
    batch = len(seqlens_k)
    feeds: Feeds = {}
    if packed:
        feeds["query"] = random(rng, batch, length, (heads + 2 * kv_heads) * HEAD_SIZE)
    else:
        feeds["query"] = random(rng, batch, length, heads * HEAD_SIZE)
        feeds["key"] = random(rng, batch, length, kv_heads * HEAD_SIZE)
        feeds["value"] = random(rng, batch, length, kv_heads * HEAD_SIZE)
    if cached:
        feeds["past_key"] = random(rng, batch, kv_heads, cached, HEAD_SIZE)
        feeds["past_value"] = random(rng, batch, kv_heads, cached, HEAD_SIZE)
    feeds["seqlens_k"] = np.array(seqlens_k, np.int32)
    feeds["total_sequence_length"] = np.array(total, np.int32)
    return feeds


GQA_INPUTS = [
    "query",
    "key",
    "value",
    "past_key",
    "past_value",
    "seqlens_k",
    "total_sequence_length",
    "cos_cache",
    "sin_cache",
    "position_ids",
    "attention_bias",
    "head_sink",
]
GQA_OUTPUTS = ["output", "present_key", "present_value"]

#: (seqlens_k, new tokens, total_sequence_length, cache length): a first prompt, one with a
#: right-padded row, one token after right-padded caches of different lengths, and a second
#: prompt after a cache (a batch of one).
GQA_STEPS = {
    "prompt": ([4, 4], 5, 5, 0),
    "padded-prompt": ([4, 2], 5, 5, 0),
    "token": ([6, 3, 4], 1, 7, 6),
    "token-in-longer-cache": ([3, 5], 1, 6, 8),
    "second-prompt": ([6], 3, 7, 4),
}


def valid_queries(seqlens_k: list[int], length: int, total: int) -> np.ndarray:
    """``[B, S, 1]``: the queries whose outputs onnxruntime defines (a padded prompt's padding
    rows are left unspecified)."""
    rows = np.array(seqlens_k) + 1 if length == total else np.full(len(seqlens_k), length)
    return (np.arange(length) < rows[:, None])[:, :, None]


def outputs_of(attrs: dict[str, Any]) -> list[str]:
    """GroupQueryAttention's outputs: with the scores where ``qk_output`` asks for them."""
    return [*GQA_OUTPUTS, "output_qk"] if attrs.get("qk_output") else GQA_OUTPUTS


def compare_gqa(
    step: str,
    heads: int,
    kv_heads: int,
    packed: bool = False,
    extra: Feeds | None = None,
    dtype: type = np.float32,
    **attrs,
):
    seqlens_k, length, total, cached = GQA_STEPS[step]
    rng = np.random.default_rng(hash((step, heads, kv_heads, packed)) % 2**32)
    feeds = gqa_feeds(rng, seqlens_k, length, total, cached, heads, kv_heads, packed)
    feeds.update(extra or {})
    feeds = {
        name: value.astype(dtype) if value.dtype == np.float32 else value for name, value in feeds.items()
    }
    element = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = node_model(
        "GroupQueryAttention",
        given_inputs(GQA_INPUTS, feeds),
        outputs_of(attrs),
        feeds,
        element,
        num_heads=heads,
        kv_num_heads=kv_heads,
        **attrs,
    )
    want, got = onnxruntime_run(model, feeds), spawnml_run(model, feeds)
    valid = valid_queries(seqlens_k, length, total)
    for values in (got, want):
        values[0] = np.where(valid, values[0], 0)
        if attrs.get("qk_output"):  # the scores [B, N, S, total] of the valid queries
            values[3] = np.where(valid[:, None], values[3], 0)
    for name, mine, theirs in zip(outputs_of(attrs), got, want, strict=True):
        assert mine.dtype == theirs.dtype, name
        if dtype == np.float32:
            assert_close(mine, theirs, name)
        else:  # onnxruntime rounds float16 intermediates otherwise: two steps of the largest output
            step_size = float(np.finfo(dtype).eps) * float(np.abs(theirs).max())
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=2 * step_size, err_msg=name)


@pytest.mark.parametrize("step", sorted(GQA_STEPS))
@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (4, 1), (2, 2)])
def test_group_query_attention(step: str, heads: int, kv_heads: int):
    """Grouped key/value heads (two and four query heads each, and one each) over right-padded
    caches: the output and the present key and value."""
    compare_gqa(step, heads, kv_heads)


@pytest.mark.parametrize("step", sorted(GQA_STEPS))
def test_group_query_attention_packed(step: str):
    compare_gqa(step, 4, 2, packed=True)


@pytest.mark.parametrize("step", sorted(GQA_STEPS))
def test_group_query_attention_float16(step: str):
    """float16 inputs, cache and rotary caches."""
    cos, sin = rotary_caches(16)
    compare_gqa(step, 4, 2, extra={"cos_cache": cos, "sin_cache": sin}, dtype=np.float16, do_rotary=1)


@pytest.mark.parametrize("step", sorted(GQA_STEPS))
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary_half", [16, 8])
def test_group_query_attention_rotary(step: str, interleaved: int, rotary_half: int):
    """Rotary embedding of all of a head, or of its first half, by halves and interleaved."""
    cos, sin = rotary_caches(rotary_half)
    compare_gqa(
        step, 4, 2, extra={"cos_cache": cos, "sin_cache": sin}, do_rotary=1, rotary_interleaved=interleaved
    )


@pytest.mark.parametrize("step", sorted(GQA_STEPS))
def test_group_query_attention_position_ids(step: str):
    """Rotary embedding at given positions (on a first prompt, onnxruntime counts from the first)."""
    seqlens_k, length, _, _ = GQA_STEPS[step]
    cos, sin = rotary_caches(16)
    positions = np.random.default_rng(9).integers(0, CACHE_LENGTH - length, (len(seqlens_k), length))
    extra = {"cos_cache": cos, "sin_cache": sin, "position_ids": positions}
    compare_gqa(step, 4, 2, extra=extra, do_rotary=1)


@pytest.mark.parametrize("step", sorted(GQA_STEPS))
@pytest.mark.parametrize(
    "attrs",
    [
        {"local_window_size": 2},
        {"softcap": 1.5},
        {"smooth_softmax": 1},
        {"scale": 0.3},
        {"local_window_size": 1, "softcap": 2.0, "smooth_softmax": 1},
        {"causal": 0},
        {"causal": 0, "softcap": 2.0},
        {"qk_output": 1},
        {"qk_output": 2},
        {"qk_output": 1, "softcap": 1.5, "local_window_size": 2},
        {"qk_output": 2, "smooth_softmax": 1, "local_window_size": 2},
    ],
    ids=str,
)
def test_group_query_attention_settings(step: str, attrs: dict):
    compare_gqa(step, 4, 2, **attrs)


@pytest.mark.parametrize("step", sorted(GQA_STEPS))
def test_group_query_attention_head_sink(step: str):
    sink = np.array([0.5, -1.0, 2.0, 0.0], np.float32)
    compare_gqa(step, 4, 2, extra={"head_sink": sink})


@pytest.mark.parametrize("step", sorted(GQA_STEPS))
@pytest.mark.parametrize("per_head", [False, True])
def test_group_query_attention_bias(step: str, per_head: bool):
    """An additive bias ``[B, 1, S, total]``, or ``[1, N, S, total]``."""
    seqlens_k, length, total, _ = GQA_STEPS[step]
    shape = (1, 4, length, total) if per_head else (len(seqlens_k), 1, length, total)
    bias = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    compare_gqa(step, 4, 2, extra={"attention_bias": bias})


#: Right-padded chunks: (seqlens_k, query_seqlens, chunk length, total_sequence_length, cache
#: length): a whole and a partial chunk, a chunk and an idle row, single tokens.
GQA_CHUNKS = {
    "whole-and-partial": ([6, 4], [3, 1], 3, 8, 8),
    "idle-row": ([5, 3], [2, 0], 3, 8, 8),
    "single-tokens": ([4, 2], [1, 1], 1, 8, 8),
}
GQA_ALL_INPUTS = [*GQA_INPUTS, "k_scale", "v_scale", "q_norm_weight", "k_norm_weight", "query_seqlens"]


@pytest.mark.parametrize("case", sorted(GQA_CHUNKS))
@pytest.mark.parametrize("rotary", [False, True])
def test_group_query_attention_query_seqlens(case: str, rotary: bool):
    """Chunks of ``query_seqlens`` valid tokens each, then padding, after a cache: the outputs of
    the valid tokens and the cache up to each row's total length (the rest onnxruntime leaves
    unspecified)."""
    seqlens_k, counts, length, total, cached = GQA_CHUNKS[case]
    feeds = gqa_feeds(np.random.default_rng(10), seqlens_k, length, total, cached, 4, 2, False)
    feeds["query_seqlens"] = np.array(counts, np.int32)
    attrs = {}
    if rotary:
        feeds["cos_cache"], feeds["sin_cache"] = rotary_caches(16)
        attrs["do_rotary"] = 1
    inputs = given_inputs(GQA_ALL_INPUTS, feeds)
    model = node_model(
        "GroupQueryAttention", inputs, GQA_OUTPUTS, feeds, num_heads=4, kv_num_heads=2, **attrs
    )
    want, got = onnxruntime_run(model, feeds), spawnml_run(model, feeds)
    valid_rows = (np.arange(length) < np.array(counts)[:, None])[:, :, None]
    valid_keys = (np.arange(want[1].shape[2]) < np.array(seqlens_k)[:, None] + 1)[:, None, :, None]
    for name, mine, theirs, valid in zip(
        GQA_OUTPUTS, got, want, (valid_rows, valid_keys, valid_keys), strict=True
    ):
        assert_close(np.where(valid, mine, 0), np.where(valid, theirs, 0), name)


#: Settings the CPU backend refuses, each with the words its refusal gives.
GQA_REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "window-without-causal": ({"causal": 0, "local_window_size": 2}, "local_window_size needs causal=1"),
    "quantized-cache": ({"kv_cache_bit_width": 8, "k_quant_type": "PER_TENSOR"}, "quantized key/value cache"),
    "sliding-window-cache": ({"sliding_window_cache": 1, "local_window_size": 2}, "sliding_window_cache=1"),
    "qk-output": ({"qk_output": 3}, "qk_output=3"),
}


@pytest.mark.parametrize("case", sorted(GQA_REFUSED))
def test_group_query_attention_refused(case: str):
    attrs, words = GQA_REFUSED[case]
    feeds = gqa_feeds(np.random.default_rng(0), [4], 5, 5, 0, 4, 2, False)
    model = node_model(
        "GroupQueryAttention",
        given_inputs(GQA_INPUTS, feeds),
        GQA_OUTPUTS,
        feeds,
        num_heads=4,
        kv_num_heads=2,
        **attrs,
    )
    with pytest.raises(spawnml.errors.UnsupportedOperatorError, match=rf"GroupQueryAttention.*{words}"):
        spawnml.InferenceSession(model, providers=["cpu"])


# MultiHeadAttention --------------------------------------------------------------------------

MHA_INPUTS = ["query", "key", "value", "bias", "key_padding_mask", "attention_bias", "past_key", "past_value"]
MHA_OUTPUTS = ["output", "present_key", "present_value"]
HEADS, WIDTH = 4, 32


def mha_feeds(
    rng: np.random.Generator, batch: int, length: int, kv_length: int, cached: int, bias: bool
) -> Feeds:
    feeds = {
        "query": random(rng, batch, length, WIDTH),
        "key": random(rng, batch, kv_length, WIDTH),
        "value": random(rng, batch, kv_length, WIDTH),
    }
    if bias:
        feeds["bias"] = random(rng, 3 * WIDTH)
    if cached:
        feeds["past_key"] = random(rng, batch, HEADS, cached, WIDTH // HEADS)
        feeds["past_value"] = random(rng, batch, HEADS, cached, WIDTH // HEADS)
    return feeds


def key_padding_mask(kind: str, batch: int, keys: int) -> np.ndarray | None:
    """A mask of the last row's second half of the keys: as key counts ``[B]``, or 0/1 ``[B, T]``."""
    if kind == "none":
        return None
    counts = np.full(batch, keys, np.int32)
    counts[-1] = keys // 2 + 1
    if kind == "lengths":
        return counts
    return (np.arange(keys) < counts[:, None]).astype(np.int32)


def compare_mha(feeds: Feeds, outputs: list[str], **attrs) -> None:
    model = node_model(
        "MultiHeadAttention", given_inputs(MHA_INPUTS, feeds), outputs, feeds, num_heads=HEADS, **attrs
    )
    want, got = onnxruntime_run(model, feeds), spawnml_run(model, feeds)
    for name, mine, theirs in zip(outputs, got, want, strict=True):
        assert_close(mine, theirs, name)


@pytest.mark.parametrize("mask", ["none", "lengths", "raw"])
@pytest.mark.parametrize("unidirectional", [0, 1])
@pytest.mark.parametrize("attention_bias", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_multi_head_attention(mask: str, unidirectional: int, attention_bias: bool, bias: bool):
    """Separate Q, K and V of a prompt, with the projections' bias, a key padding mask, causality
    and an additive attention bias ``[1, N, S, T]``."""
    rng = np.random.default_rng(1)
    feeds = mha_feeds(rng, 2, 6, 6, 0, bias)
    padding = key_padding_mask(mask, 2, 6)
    if padding is not None:
        feeds["key_padding_mask"] = padding
    if attention_bias:
        feeds["attention_bias"] = random(rng, 1, HEADS, 6, 6)
    compare_mha(feeds, MHA_OUTPUTS[:1], unidirectional=unidirectional)


@pytest.mark.parametrize("length", [1, 3])
@pytest.mark.parametrize("mask", ["none", "lengths", "raw"])
@pytest.mark.parametrize("attention_bias", [False, True])
def test_multi_head_attention_cache(length: int, mask: str, attention_bias: bool):
    """New tokens after a key/value cache, causal, as GPT-2-style decoders run: the output, the
    present key and value (the cache and the new keys and values together) and the scores."""
    rng = np.random.default_rng(2)
    cached = 5
    feeds = mha_feeds(rng, 2, length, length, cached, bias=True)
    padding = key_padding_mask(mask, 2, cached + length)
    if padding is not None:
        feeds["key_padding_mask"] = padding
    if attention_bias:
        feeds["attention_bias"] = random(rng, 2, 1, length, cached + length)
    compare_mha(feeds, [*MHA_OUTPUTS, "qk"], unidirectional=1)


def test_multi_head_attention_cross_cache():
    """Keys and values ``[B, N, L, H]`` already split into heads (an encoder's, cached)."""
    rng = np.random.default_rng(3)
    feeds = {
        "query": random(rng, 2, 3, WIDTH),
        "key": random(rng, 2, HEADS, 7, WIDTH // HEADS),
        "value": random(rng, 2, HEADS, 7, WIDTH // HEADS),
        "key_padding_mask": key_padding_mask("lengths", 2, 7),
    }
    compare_mha(feeds, MHA_OUTPUTS[:1])


@pytest.mark.parametrize("form", ["packed-qkv", "packed-kv"])
@pytest.mark.parametrize("mask", ["none", "raw"])
def test_multi_head_attention_packed(form: str, mask: str):
    """Packed Q/K/V ``[B, S, N, 3, H]`` and packed K/V ``[B, L, N, 2, H]``, against onnxruntime
    given the same queries, keys and values separately (its CPU provider runs no packed form)."""
    rng = np.random.default_rng(4)
    separate = mha_feeds(rng, 2, 5, 5, 0, bias=False)
    padding = key_padding_mask(mask, 2, 5)
    if padding is not None:
        separate["key_padding_mask"] = padding
    heads = {name: separate[name].reshape(2, 5, HEADS, 1, -1) for name in ("query", "key", "value")}
    packed = {name: value for name, value in separate.items() if name not in heads}
    if form == "packed-qkv":
        packed["query"] = np.concatenate([heads["query"], heads["key"], heads["value"]], axis=3)
    else:
        packed["query"] = separate["query"]
        packed["key"] = np.concatenate([heads["key"], heads["value"]], axis=3)
    reference = node_model(
        "MultiHeadAttention", given_inputs(MHA_INPUTS, separate), MHA_OUTPUTS[:1], separate, num_heads=HEADS
    )
    model = node_model(
        "MultiHeadAttention", given_inputs(MHA_INPUTS, packed), MHA_OUTPUTS[:1], packed, num_heads=HEADS
    )
    (want,) = onnxruntime_run(reference, separate)
    (got,) = spawnml_run(model, packed)
    assert_close(got, want, form)


def test_multi_head_attention_refused():
    """A shared key/value buffer (past_sequence_length), as convert_generation writes for CUDA."""
    rng = np.random.default_rng(0)
    feeds = mha_feeds(rng, 1, 1, 1, 4, bias=False)
    feeds["past_sequence_length"] = np.array(4, np.int32)
    model = node_model(
        "MultiHeadAttention",
        given_inputs([*MHA_INPUTS, "past_sequence_length"], feeds),
        MHA_OUTPUTS,
        feeds,
        num_heads=HEADS,
    )
    with pytest.raises(
        spawnml.errors.UnsupportedOperatorError, match=r"MultiHeadAttention.*past_sequence_length"
    ):
        spawnml.InferenceSession(model, providers=["cpu"])


# GemmFastGelu, BiasAdd and BiasSoftmax --------------------------------------------------------


def standard_model(nodes: list[onnx.NodeProto], feeds: Feeds, opset: int) -> bytes:
    graph = helper.make_graph(
        nodes,
        "reference",
        [helper.make_tensor_value_info(name, FLOAT, value.shape) for name, value in feeds.items()],
        [helper.make_tensor_value_info("y", FLOAT, None)],
    )
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def test_bias_add():
    """``X + bias + skip`` (as Stable Diffusion's fused attention output writes it)."""
    rng = np.random.default_rng(6)
    feeds = {"x": random(rng, 2, 9, 16), "bias": random(rng, 16), "skip": random(rng, 2, 9, 16)}
    reference = standard_model(
        [helper.make_node("Add", ["x", "bias"], ["sum"]), helper.make_node("Add", ["sum", "skip"], ["y"])],
        feeds,
        17,
    )
    (want,) = onnxruntime_run(reference, feeds)
    (got,) = spawnml_run(node_model("BiasAdd", ["x", "bias", "skip"], ["y"], feeds), feeds)
    assert_close(got, want, "BiasAdd")


@pytest.mark.parametrize(
    "bias_shape,axis,inner",
    [((2, 1, 1, 7), 3, 1), ((1, 3, 5, 7), 3, 0), ((5, 7), 3, 0), ((2, 1, 5, 7), 2, 1)],
)
def test_bias_softmax(bias_shape: tuple[int, ...], axis: int, inner: int):
    """Softmax of ``data + bias`` over the axes from ``axis`` on, against Add and Softmax of
    opset 11 (which takes the axes from ``axis`` on as one), the bias broadcast over inner or
    outer axes."""
    rng = np.random.default_rng(7)
    feeds = {"data": random(rng, 2, 3, 5, 7), "bias": random(rng, *bias_shape)}
    reference = standard_model(
        [
            helper.make_node("Add", ["data", "bias"], ["sum"]),
            helper.make_node("Softmax", ["sum"], ["y"], axis=axis),
        ],
        feeds,
        11,
    )
    (want,) = onnxruntime_run(reference, feeds)
    model = node_model("BiasSoftmax", ["data", "bias"], ["y"], feeds, axis=axis, is_inner_broadcast=inner)
    (got,) = spawnml_run(model, feeds)
    assert_close(got, want, "BiasSoftmax")


@pytest.mark.parametrize("bias", [False, True])
def test_gemm_fast_gelu(bias: bool):
    """FastGelu of ``X @ W + bias``, against MatMul and onnxruntime's FastGelu (its CPU provider
    runs no GemmFastGelu)."""
    rng = np.random.default_rng(8)
    feeds = {"x": random(rng, 2, 5, 16), "w": random(rng, 16, 24)}
    if bias:
        feeds["bias"] = random(rng, 24)
    reference = standard_model(
        [
            helper.make_node("MatMul", ["x", "w"], ["product"]),
            helper.make_node("FastGelu", ["product", *list(feeds)[2:]], ["y"], domain=MS),
        ],
        feeds,
        17,
    )
    (want,) = onnxruntime_run(reference, feeds)
    (got,) = spawnml_run(node_model("GemmFastGelu", list(feeds), ["y"], feeds), feeds)
    assert_close(got, want, "GemmFastGelu")
