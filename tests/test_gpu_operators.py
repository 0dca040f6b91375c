"""Operators of the shared GPU table beyond what the ONNX node tests exercise, on every GPU backend.

Each case is a one-node ONNX model run whole on the GPU provider (its placement is checked),
compared with a reference: numpy / ml_dtypes for the casts to the 16-bit floats (exactly, over
every float16, the midpoints between neighbours, their float32 neighbours and normal float32
values of exponents from -100 to 100), PyTorch's ``scaled_dot_product_attention`` for Attention on shapes
past one workgroup (grouped heads, causal, boolean and additive masks, a key/value cache),
``torch.nn.functional.rms_norm`` for RMSNormalization and numpy's stable sort for TopK (exactly,
ties included), numpy for the exact float remainder (bit for bit) and the DFT (float64; 1e-4
relative, 1e-4 * sqrt(length) absolute), PyTorch's ``grid_sample`` for GridSample (ONNX's
reference evaluator for bicubic with border padding, where PyTorch does not clamp the sampling
point), numpy's float64 ``einsum`` for Einsum and ``linalg.det`` for Det (1e-4). Tolerances:
1e-5 relative and absolute for attention, normalization, GridSample and Einsum (float32 sums of
up to 200 terms in another order).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
import spawnml
import torch
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from tests.backends import GPU_BACKENDS, backend_or_skip

rng = np.random.default_rng(23)


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def model(op: str, inputs: dict[str, np.ndarray], outputs: int = 1, opset: int = 23, **attrs) -> bytes:
    """A one-node model of ``op`` over ``inputs`` (a name starting with ``_`` leaves that input out)."""
    names = [n if n[0] != "_" else "" for n in inputs]
    node = helper.make_node(op, names, [f"y{i}" for i in range(outputs)], **attrs)
    feeds = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in inputs.items()
        if n[0] != "_"
    ]
    results = [helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None) for i in range(outputs)]
    graph = helper.make_graph([node], op, feeds, results)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10
    ).SerializeToString()


def run(provider: str, onnx_model: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = spawnml.InferenceSession(onnx_model, providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    return session.run(None, {n: v for n, v in feeds.items() if n[0] != "_"})


def float32_probes() -> np.ndarray:
    """Every float16, each midpoint between float16 neighbours and its float32 neighbours, and
    random normal float32 values of exponents from -100 to 100 (float32 subnormals are left to
    the device), with the signed zeros, infinities and NaN."""
    halves = np.arange(2**16, dtype=np.uint16).view(np.float16)
    halves = np.sort(halves[np.isfinite(halves)].astype(np.float32))
    middles = (halves[:-1].astype(np.float64) + halves[1:]) / 2
    middles = middles[np.abs(middles) < 65520].astype(np.float32)
    around = [np.nextafter(middles, np.float32(np.inf)), np.nextafter(middles, np.float32(-np.inf))]
    spread = rng.standard_normal(20000).astype(np.float32) * np.exp2(rng.integers(-100, 100, 20000)).astype(
        np.float32
    )
    specials = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, 3.4e38, -3.4e38], np.float32
    )
    return np.concatenate([halves, middles, *around, spread, specials])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_cast_to_16_bit_floats_rounds_like_numpy(provider, dtype):
    x = float32_probes()
    (got,) = run(
        provider, model("Cast", {"x": x}, to=helper.np_dtype_to_tensor_dtype(np.dtype(dtype))), {"x": x}
    )
    with np.errstate(over="ignore"):
        want = x.astype(dtype)
    assert got.dtype == want.dtype
    # Widened to float32 (exactly), so that NaN matches NaN and a zero matches either sign:
    # WGSL implementations need not keep the sign of zero.
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


ATTENTION = [  # (batch, q heads, kv heads, q length, past length, new kv length, head size, attributes)
    (2, 8, 2, 70, 0, 70, 16, {"is_causal": 1}),
    (1, 4, 4, 5, 90, 5, 32, {"is_causal": 1}),
    (2, 6, 3, 33, 0, 65, 8, {"scale": 0.3}),
    (1, 2, 1, 1, 120, 1, 64, {}),
]


@pytest.mark.parametrize(
    ("batch", "heads", "kv_heads", "q_len", "past", "kv_len", "size", "attrs"), ATTENTION
)
@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_attention_matches_pytorch(provider, batch, heads, kv_heads, q_len, past, kv_len, size, attrs, mask):
    total = past + kv_len
    q = rng.standard_normal((batch, heads, q_len, size)).astype(np.float32)
    k, v = (rng.standard_normal((batch, kv_heads, kv_len, size)).astype(np.float32) for _ in range(2))
    feeds = {"q": q, "k": k, "v": v}
    attn_mask = None
    if mask == "bool":
        attn_mask = rng.random((q_len, total)) < 0.8
        attn_mask[:, 0] = True  # every query sees a key
    elif mask == "float":
        attn_mask = rng.standard_normal((batch, 1, q_len, total)).astype(np.float32)
    feeds["mask" if attn_mask is not None else "_mask"] = attn_mask if attn_mask is not None else np.zeros(0)
    if past:
        feeds["past_key"], feeds["past_value"] = (
            rng.standard_normal((batch, kv_heads, past, size)).astype(np.float32) for _ in range(2)
        )
    y, present_key, present_value = run(provider, model("Attention", feeds, outputs=3, **attrs), feeds)

    keys, values = (
        torch.cat([torch.from_numpy(feeds[f"past_{n}"]), torch.from_numpy(t)], 2)
        if past
        else torch.from_numpy(t)
        for n, t in (("key", k), ("value", v))
    )
    bias = torch.zeros(q_len, total)
    if attrs.get("is_causal"):  # the query block sits after the cache: bottom-right aligned
        bias = bias.masked_fill(
            torch.ones(q_len, total, dtype=torch.bool).tril(past).logical_not(), -torch.inf
        )
    if attn_mask is not None:
        given = torch.from_numpy(attn_mask)
        bias = bias + (torch.zeros(given.shape).masked_fill(~given, -torch.inf) if mask == "bool" else given)
    want = torch.nn.functional.scaled_dot_product_attention(
        torch.from_numpy(q), keys, values, attn_mask=bias, scale=attrs.get("scale"), enable_gqa=True
    )
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(present_key, keys.numpy())
    np.testing.assert_array_equal(present_value, values.numpy())


@pytest.mark.parametrize(("shape", "axis"), [((3, 70, 200), -1), ((4, 5, 6, 7), 2)])
def test_rms_normalization_matches_pytorch(provider, shape, axis):
    x = rng.standard_normal(shape).astype(np.float32)
    scale = rng.standard_normal(shape[axis:]).astype(np.float32)
    (got,) = run(
        provider,
        model("RMSNormalization", {"x": x, "scale": scale}, axis=axis, epsilon=1e-5),
        {"x": x, "scale": scale},
    )
    want = torch.nn.functional.rms_norm(torch.from_numpy(x), shape[axis:], torch.from_numpy(scale), eps=1e-5)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize(("shape", "axis", "k"), [((130, 50), 1, 7), ((6, 40, 9), 1, 40), ((300,), 0, 1)])
def test_top_k_matches_a_stable_sort(provider, shape, axis, k, largest):
    x = rng.integers(-5, 5, shape).astype(np.float32)  # many ties: equal values keep index order
    feeds = {"x": x, "k": np.array([k], np.int64)}
    values, indices = run(
        provider, model("TopK", feeds, outputs=2, opset=11, axis=axis, largest=largest), feeds
    )
    order = np.argsort(-x if largest else x, axis=axis, kind="stable").take(np.arange(k), axis=axis)
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(x, order, axis=axis))


@pytest.mark.parametrize("fmod", [1, 0])
def test_float_mod_is_exact(provider, fmod):
    a = np.concatenate(
        [rng.standard_normal(500) * 1e6, [5.5, -5.5, 1e30, -7.0, 0.0, 3.0, np.inf, 2.0]]
    ).astype(np.float32)
    b = np.concatenate([rng.standard_normal(500) * 1e-3, [2.0, 2.0, 3.3, 0.5, 1.0, 0.0, 2.0, np.inf]]).astype(
        np.float32
    )
    opset = 13 if fmod else 28  # floats with fmod=0 are valid from opset 28 on
    (got,) = run(provider, model("Mod", {"a": a, "b": b}, opset=opset, fmod=fmod), {"a": a, "b": b})
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.fmod(a, b) if fmod else np.mod(a, b)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_matches_pytorch(provider, mode, padding, align):
    x = rng.standard_normal((2, 3, 17, 23)).astype(np.float32)
    grid = (rng.random((2, 11, 13, 2)) * 2.6 - 1.3).astype(np.float32)  # some points outside
    feeds = {"x": x, "grid": grid}
    onnx_model = model("GridSample", feeds, opset=20, mode=mode, padding_mode=padding, align_corners=align)
    (got,) = run(provider, onnx_model, feeds)
    if mode == "cubic" and padding == "border":
        # PyTorch clamps each bicubic tap but not the sampling point; ONNX clamps the point first.
        (want,) = ReferenceEvaluator(onnx.load_from_string(onnx_model)).run(None, feeds)
    else:
        torch_mode = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}[mode]
        want = torch.nn.functional.grid_sample(
            torch.from_numpy(x), torch.from_numpy(grid), torch_mode, padding, align_corners=bool(align)
        ).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("length", "inverse", "onesided"), [(64, 0, 0), (50, 1, 0), (64, 0, 1), (30, 1, 1)])
def test_dft_matches_numpy(provider, length, inverse, onesided):
    parts = 1 if onesided and not inverse else 2
    x = rng.standard_normal((3, length, parts)).astype(np.float32)
    feeds = {"x": x}
    (got,) = run(provider, model("DFT", feeds, opset=17, axis=1, inverse=inverse, onesided=onesided), feeds)
    z = x[..., 0].astype(np.float64) + (1j * x[..., 1] if parts == 2 else 0)
    if inverse and onesided:
        want = np.fft.irfft(z, axis=1)[..., None]
    else:
        spectrum = (np.fft.ifft if inverse else np.fft.rfft if onesided else np.fft.fft)(z, axis=1)
        want = np.stack([spectrum.real, spectrum.imag], axis=-1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(length))


EINSUMS = [
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
    ("ii->i", [(6, 6)]),
    ("bii->bi", [(3, 5, 5)]),
    ("ij->", [(7, 9)]),
    ("i,i", [(70,), (70,)]),
    ("ij,jk", [(4, 5), (5, 6)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 9, 16), (2, 3, 11, 16)]),
    ("ijk,jl,lk->i", [(3, 4, 5), (4, 6), (6, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 2)]),
    ("ij->ji", [(3, 8)]),
]


@pytest.mark.parametrize(("equation", "shapes"), EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_matches_numpy(provider, equation, shapes):
    feeds = {f"x{i}": rng.standard_normal(shape).astype(np.float32) for i, shape in enumerate(shapes)}
    (got,) = run(provider, model("Einsum", feeds, opset=12, equation=equation), feeds)
    want = np.einsum(equation, *(x.astype(np.float64) for x in feeds.values()))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_det_matches_numpy(provider):
    x = rng.standard_normal((4, 3, 7, 7)).astype(np.float32)
    x[0, 0, :, 0] = 0  # a singular matrix
    x[1, 1, 0, 0] = 0  # a zero where elimination must pivot
    (got,) = run(provider, model("Det", {"x": x}, opset=22), {"x": x})
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float64)), rtol=1e-4, atol=1e-4)
