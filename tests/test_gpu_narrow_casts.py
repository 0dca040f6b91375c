"""Casts and QuantizeLinear to the 8- and 4-bit floats and the 2- to 16-bit integers on every GPU
backend, against ONNX's reference evaluator (which rounds and wraps with numpy and ml_dtypes).

Each case is a one-node model run whole on the GPU provider (its placement is checked), its result
also cast on to float32 or int32 on the device, so that what the device holds is checked besides
what reading back narrows. Results must equal the reference exactly, widened to float32 or int32
so that NaN matches NaN and a zero matches either sign (WGSL implementations need not keep the
sign of zero, and the reference's float4 result for a NaN takes the NaN's sign, which the device
does not read). The float probes are every float16, every value of the target format with the
midpoints between neighbours and their float32 neighbours, values just inside and past the
largest, random float32 of exponents -30 to 30, the signed zeros, the infinities and NaN.
"""

from __future__ import annotations

import platform

import ml_dtypes
import numpy as np
import onnx
import pytest
import spawnml
from onnx import helper
from onnx.reference import ReferenceEvaluator

from tests.backends import GPU_BACKENDS, backend_or_skip

rng = np.random.default_rng(29)

NARROW_FLOATS = [
    ml_dtypes.float8_e4m3fn,
    ml_dtypes.float8_e4m3fnuz,
    ml_dtypes.float8_e5m2,
    ml_dtypes.float8_e5m2fnuz,
    ml_dtypes.float4_e2m1fn,
]
NARROW_INTEGERS = [np.dtype(t) for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2)]
#: The integers held as int32 whose casts wrap on the device.
WRAPPED = [*NARROW_INTEGERS, *map(np.dtype, (np.int8, np.uint8, np.int16, np.uint16))]


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def model(op: str, inputs: dict[str, np.ndarray], out: type, opset: int = 25, **attrs) -> onnx.ModelProto:
    """``op`` over ``inputs``, its output ``y`` of type ``out``, and ``y`` cast on to int32 or float32
    as ``wide``: so the values the device holds are checked as well as those read back."""
    wide = np.int32 if np.dtype(out) in WRAPPED else np.float32
    nodes = [
        helper.make_node(op, list(inputs), ["y"], **attrs),
        helper.make_node("Cast", ["y"], ["wide"], to=helper.np_dtype_to_tensor_dtype(np.dtype(wide))),
    ]
    feeds = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in inputs.items()
    ]
    results = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(t)), None)
        for name, t in (("y", out), ("wide", wide))
    ]
    graph = helper.make_graph(nodes, op, feeds, results)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=11)


def check(provider: str, onnx_model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    """The model on ``provider`` equals ONNX's reference evaluator exactly."""
    with np.errstate(invalid="ignore"):  # numpy's warning for NaN cast to an integer
        want = ReferenceEvaluator(onnx_model).run(None, feeds)
    session = spawnml.InferenceSession(onnx_model.SerializeToString(), providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    got = session.run(None, feeds)
    for have, expected in zip(got, want, strict=True):
        assert have.dtype == expected.dtype and have.shape == expected.shape
        wide = np.int32 if expected.dtype in WRAPPED else np.float32
        np.testing.assert_array_equal(have.astype(wide), expected.astype(wide))


def float_probes(dtype: type) -> np.ndarray:
    codes = np.arange(2 ** ml_dtypes.finfo(dtype).bits, dtype=np.uint8)  # float4 holds one per byte
    exact = codes.view(dtype).astype(np.float32)
    exact = np.unique(exact[np.isfinite(exact)])
    middles = ((exact[:-1].astype(np.float64) + exact[1:]) / 2).astype(np.float32)
    around = [np.nextafter(middles, np.float32(np.inf)), np.nextafter(middles, np.float32(-np.inf))]
    largest = float(ml_dtypes.finfo(dtype).max)
    edges = np.array([largest * f for f in (1.03, 1.0625, 1.07, 1.125, 1.2, 2.0)], np.float32)
    halves = np.arange(2**16, dtype=np.uint16).view(np.float16).astype(np.float32)
    spread = (rng.standard_normal(20000) * np.exp2(rng.integers(-30, 30, 20000))).astype(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1e-30, -1e-30], np.float32)
    return np.concatenate([exact, middles, *around, edges, -edges, halves, spread, specials])


def code(dtype: type) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("dtype", NARROW_FLOATS, ids=lambda t: np.dtype(t).name)
def test_cast_to_narrow_floats_rounds_like_the_reference(provider, dtype, saturate):
    x = float_probes(dtype)
    check(provider, model("Cast", {"x": x}, dtype, to=code(dtype), saturate=saturate), {"x": x})


@pytest.mark.parametrize("source", [np.float16, np.int32, np.uint8, ml_dtypes.float8_e5m2])
@pytest.mark.parametrize("dtype", NARROW_FLOATS, ids=lambda t: np.dtype(t).name)
def test_castlike_to_narrow_floats_from_other_types(provider, dtype, source):
    """Sources held as float32 (float16, float8) or int32 (integers converted first)."""
    if np.dtype(source).kind in "iu":
        info = np.iinfo(source)
        x = rng.integers(max(info.min, -70000), min(info.max, 70000), 5000, endpoint=True).astype(source)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            x = float_probes(ml_dtypes.float8_e5m2).astype(source)
    like = np.zeros(0, dtype)
    check(provider, model("CastLike", {"x": x, "like": like}, dtype, saturate=0), {"x": x, "like": like})


def integer_probes(source: type) -> np.ndarray:
    """Values of ``source`` inside int32 (where every platform converts floats alike)."""
    if np.dtype(source).kind == "f":
        steps = np.arange(-40, 40, 0.25)
        spread = np.clip(
            rng.standard_normal(5000) * np.exp2(rng.integers(0, 31, 5000)), -(2.0**31), 2.0**31 - 128
        )
        edges = np.array([2**24 + 2, 2**27 + 16, 2**30 + 64, -(2.0**31), 2.0**31 - 128])
        values = np.concatenate([steps, spread, edges])
        return values[np.abs(values) <= np.finfo(source).max].astype(source)
    if np.dtype(source) == np.bool_:
        return np.array([True, False, True])
    info = np.iinfo(source)
    return rng.integers(info.min, info.max, 5000, endpoint=True).astype(source)


@pytest.mark.parametrize("source", [np.float32, np.float16, np.int32, np.int8, np.uint16, np.bool_])
@pytest.mark.parametrize("dtype", WRAPPED, ids=lambda t: np.dtype(t).name)
def test_cast_to_narrow_integers_wraps_like_the_reference(provider, dtype, source):
    x = integer_probes(source)
    check(provider, model("Cast", {"x": x}, dtype, to=code(dtype)), {"x": x})


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"),
    reason="numpy converts NaN, the infinities and floats outside int32 by the platform's instruction",
)
@pytest.mark.parametrize("dtype", WRAPPED, ids=lambda t: np.dtype(t).name)
def test_cast_of_floats_outside_int32_to_integers_matches_the_reference_on_x86(provider, dtype):
    """x86 converts them to int32's minimum, whose low bits are all 0."""
    x = np.array([np.nan, np.inf, -np.inf, 2.0**31, -(2.0**31) * 1.5, 3e9 + 256, 1e30, -1e30], np.float32)
    check(provider, model("Cast", {"x": x}, dtype, to=code(dtype)), {"x": x})


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("dtype", NARROW_FLOATS, ids=lambda t: np.dtype(t).name)
def test_quantize_linear_to_narrow_floats_matches_the_reference(provider, dtype, saturate):
    """Per tensor without a zero point, and per axis with one (of the target type, as ONNX asks)."""
    x = (rng.standard_normal((4, 300)) * np.exp2(rng.integers(-8, 12, (4, 300)))).astype(np.float32)
    x[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    scale = np.array(0.75, np.float32)
    check(
        provider,
        model("QuantizeLinear", {"x": x, "scale": scale}, dtype, output_dtype=code(dtype), saturate=saturate),
        {"x": x, "scale": scale},
    )
    scales = np.array([0.5, 3.0, 0.01, 64.0], np.float32)
    zero = np.zeros(4, dtype)
    feeds = {"x": x, "scale": scales, "zero": zero}
    check(provider, model("QuantizeLinear", feeds, dtype, axis=0, saturate=saturate), feeds)


@pytest.mark.parametrize("out", [np.float16, ml_dtypes.bfloat16, np.float32], ids=lambda t: np.dtype(t).name)
def test_dequantize_linear_to_output_dtype_matches_the_reference(provider, out):
    """DequantizeLinear's output_dtype (opset 25) names the result's type apart from the scale's."""
    x = rng.integers(0, 256, (3, 40)).astype(np.uint8)
    scale, zero = np.array([0.37, 2.5, 0.001], np.float32), np.array([7, 128, 255], np.uint8)
    node = helper.make_node("DequantizeLinear", ["x", "scale", "zero"], ["y"], axis=0, output_dtype=code(out))
    graph = helper.make_graph(
        [node],
        "dequantize",
        [helper.make_tensor_value_info("x", onnx.TensorProto.UINT8, x.shape)],
        [helper.make_tensor_value_info("y", code(out), x.shape)],
        [onnx.numpy_helper.from_array(scale, "scale"), onnx.numpy_helper.from_array(zero, "zero")],
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)], ir_version=11)
    (want,) = ReferenceEvaluator(onnx_model).run(None, {"x": x})
    session = spawnml.InferenceSession(onnx_model.SerializeToString(), providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    (got,) = session.run(None, {"x": x})
    assert got.dtype == want.dtype == np.dtype(out)
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
