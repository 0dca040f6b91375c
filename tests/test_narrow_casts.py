"""Casts and QuantizeLinear to the 8- and 4-bit floats and the 2- to 16-bit integers on the CPU and
every GPU backend, against the specification's rules as :mod:`tests.narrow_reference` writes them.

Expected answers never come from ml_dtypes' or onnx's conversions, whose answers for values out of
range have changed between versions; ONNX's own node cases are checked against the same reference,
and where they disagree with the specification each backend lists them as expected failures.

Each case is a one-node model run whole on one provider (its placement is checked), its result
also cast on to float32 or int32, so that what a GPU holds is checked besides what reading back
narrows. Results must equal the reference exactly, NaN matching NaN. On the CPU the sign of zero
and of NaN must match too; GPUs may lose the sign of zero (WGSL implementations need not keep it).
The float probes are every float16, every value of the target format with the midpoints between
neighbours and their float32 neighbours, values just inside and past the largest, random float32
of exponents -30 to 30, the signed zeros, the infinities and NaN.
"""

from __future__ import annotations

import functools
import platform

import ml_dtypes
import numpy as np
import onnx
import pytest
import spawnml
from onnx import helper
from onnx.reference import ReferenceEvaluator
from spawnml import plugins
from spawnml.conformance.expectations import ExpectedFailures

from tests import narrow_reference as spec
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
#: The integers GPUs hold as int32, whose casts wrap on the device.
WRAPPED = [*NARROW_INTEGERS, *map(np.dtype, (np.int8, np.uint8, np.int16, np.uint16))]
PROVIDERS = ("cpu", *GPU_BACKENDS)


@pytest.fixture(params=PROVIDERS, scope="module")
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


def assert_same(have: np.ndarray, want: np.ndarray, strict_signs: bool, signed_nan: bool) -> None:
    """``have`` equals ``want`` (the reference's float64 or int64) exactly; with ``strict_signs``
    the signs of zeros too, and of NaN where ``signed_nan`` (the fnuz formats' one NaN is stored
    with the sign bit)."""
    assert have.shape == want.shape
    if want.dtype.kind == "i":
        np.testing.assert_array_equal(have.astype(np.int64), want)
        return
    got = have.astype(np.float64)
    np.testing.assert_array_equal(got, want)  # NaN matches NaN, -0 matches 0
    if strict_signs:
        check = (got == 0) | (np.isnan(got) & np.isnan(want) & signed_nan)
        np.testing.assert_array_equal(np.signbit(got[check]), np.signbit(want[check]))


def check(provider: str, onnx_model: onnx.ModelProto, feeds: dict[str, np.ndarray], want: np.ndarray) -> None:
    """The model on ``provider`` gives ``want`` (the reference's answer), as ``y`` and widened."""
    session = spawnml.InferenceSession(onnx_model.SerializeToString(), providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    y, wide = session.run(None, feeds)
    out = onnx_model.graph.output[0].type.tensor_type.elem_type
    assert y.dtype == helper.tensor_dtype_to_np_dtype(out)
    strict, signed_nan = provider == "cpu", "fnuz" not in y.dtype.name
    assert_same(y, want, strict, signed_nan)
    assert_same(wide, want, strict, signed_nan)


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
    specials = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 3.4e38, -3.4e38, 1e-30, -1e-30], np.float32
    )
    return np.concatenate([exact, middles, *around, edges, -edges, halves, spread, specials])


@functools.cache
def float_case(dtype: type, saturate: int) -> tuple[np.ndarray, np.ndarray]:
    """Probes and the reference's answers, computed once for every provider."""
    x = float_probes(dtype)
    return x, spec.cast(x, np.dtype(dtype), bool(saturate))


def code(dtype: type) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("dtype", NARROW_FLOATS, ids=lambda t: np.dtype(t).name)
def test_cast_to_narrow_floats_follows_the_specification(provider, dtype, saturate):
    x, want = float_case(dtype, saturate)
    check(provider, model("Cast", {"x": x}, dtype, to=code(dtype), saturate=saturate), {"x": x}, want)


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
    feeds = {"x": x, "like": like}
    check(provider, model("CastLike", feeds, dtype, saturate=0), feeds, spec.cast(x, np.dtype(dtype), False))


def integer_probes(source: type) -> np.ndarray:
    """Values of ``source`` inside int32 (where every platform converts floats alike), with every
    quarter from -40 to 40 (ties to round to even)."""
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
def test_cast_to_narrow_integers_follows_the_specification(provider, dtype, source):
    x = integer_probes(source)
    check(provider, model("Cast", {"x": x}, dtype, to=code(dtype)), {"x": x}, spec.cast(x, dtype))


@pytest.mark.parametrize("dtype", NARROW_INTEGERS, ids=lambda t: np.dtype(t).name)
def test_cast_of_special_floats_to_4_and_2_bit_integers(provider, dtype):
    """NaN and the infinities give 0; large floats keep their low bits (0 past 2**27)."""
    x = np.array(
        [np.nan, -np.nan, np.inf, -np.inf, 2.0**31, -(2.0**31) * 1.5, 3e9 + 256, 1e30, -1e30], np.float32
    )
    check(provider, model("Cast", {"x": x}, dtype, to=code(dtype)), {"x": x}, spec.cast(x, dtype))


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"),
    reason="numpy converts NaN, the infinities and floats outside int32 by the platform's instruction",
)
@pytest.mark.parametrize("dtype", WRAPPED[len(NARROW_INTEGERS) :], ids=lambda t: np.dtype(t).name)
def test_cast_of_floats_outside_int32_to_8_and_16_bit_integers_on_x86(provider, dtype):
    """x86 converts them to int32's minimum, whose low bits are all 0, as GPUs give."""
    x = np.array([np.nan, np.inf, -np.inf, 2.0**31, -(2.0**31) * 1.5, 3e9 + 256, 1e30, -1e30], np.float32)
    check(provider, model("Cast", {"x": x}, dtype, to=code(dtype)), {"x": x}, spec.cast(x, dtype))


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("dtype", NARROW_FLOATS, ids=lambda t: np.dtype(t).name)
def test_quantize_linear_to_narrow_floats_follows_the_specification(provider, dtype, saturate):
    """``x / scale + zero_point`` (in float32, the scale's type) cast as Cast does, per tensor without
    a zero point and per axis with one (of the target type, as ONNX asks)."""
    x = (rng.standard_normal((4, 300)) * np.exp2(rng.integers(-8, 12, (4, 300)))).astype(np.float32)
    x[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    scale = np.array(0.75, np.float32)
    feeds = {"x": x, "scale": scale}
    onnx_model = model("QuantizeLinear", feeds, dtype, output_dtype=code(dtype), saturate=saturate)
    check(provider, onnx_model, feeds, spec.cast(x / scale, np.dtype(dtype), bool(saturate)))
    scales = np.array([0.5, 3.0, 0.01, 64.0], np.float32)
    zero = np.zeros(4, dtype)
    feeds = {"x": x, "scale": scales, "zero": zero}
    want = spec.cast(x / scales[:, None] + np.float32(0), np.dtype(dtype), bool(saturate))
    check(provider, model("QuantizeLinear", feeds, dtype, axis=0, saturate=saturate), feeds, want)


@pytest.mark.parametrize("dtype", NARROW_INTEGERS, ids=lambda t: np.dtype(t).name)
def test_quantize_linear_to_4_and_2_bit_integers_saturates(provider, dtype):
    """QuantizeLinear: "y = saturate((x / y_scale) + y_zero_point)", "it rounds to the nearest
    even", saturating to the type's range (int4: [-8, 7], ..., uint2: [0, 3])."""
    x = np.concatenate([np.arange(-40, 40, 0.25), rng.standard_normal(500) * 30]).astype(np.float32)
    scale, zero = np.array(1.5, np.float32), np.ones((), dtype)
    feeds = {"x": x, "scale": scale, "zero": zero}
    info = ml_dtypes.iinfo(dtype)
    want = np.array([min(max(round(float(v)) + 1, info.min), info.max) for v in x / scale], np.int64)
    check(provider, model("QuantizeLinear", feeds, dtype), feeds, want)


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


# ONNX's node cases --------------------------------------------------------------------------


class _Capture:
    """A session that records the feeds a case drives it with."""

    def __init__(self) -> None:
        self.feeds: list[dict[str, np.ndarray]] = []

    def run(self, output_names, input_feed) -> list:
        self.feeds.append(dict(input_feed))
        return []


@functools.cache
def onnx_narrow_cast_cases() -> dict[str, tuple[np.ndarray, np.dtype, bool, np.ndarray]]:
    """ONNX's Cast and CastLike node cases (and CastLike's expansions) to the narrow types, but
    float8e8m0, by name: input, target type, saturate, and the case's expected output."""
    from spawnml.conformance.onnx_cases import onnx_cases

    cases = {}
    for case in onnx_cases("node"):
        if not case.name.startswith(("test_cast_", "test_castlike_")) or "e8m0" in case.name:
            continue
        proto = onnx.load_from_string(case.model())
        output = proto.graph.output[0].type.tensor_type.elem_type
        target = np.dtype(helper.tensor_dtype_to_np_dtype(output))
        if target not in NARROW_INTEGERS and target.name not in spec.FORMATS:
            continue
        node = next(n for n in proto.graph.node if n.op_type in ("Cast", "CastLike"))
        saturate = next((a.i for a in node.attribute if a.name == "saturate"), 1)
        capture = _Capture()
        case.drive(capture)
        ((feeds,), ((expected, *_),)) = capture.feeds, case.expected()
        cases[case.name] = (next(iter(feeds.values())), target, bool(saturate), expected)
    return cases


def test_the_reference_and_onnx_cases_disagree_only_where_every_backend_says_so():
    """Where ONNX's node cases (their expected outputs computed with the installed ml_dtypes) differ
    from the specification, every backend lists the case as an expected failure, and nowhere else:
    so a change of ml_dtypes or onnx shows here rather than as a silent change of answers."""
    cases = onnx_narrow_cast_cases()
    assert len(cases) > 40
    disagree = set()
    for name, (x, target, saturate, expected) in cases.items():
        want = spec.cast(x, target, saturate)
        got = expected.astype(np.int64 if want.dtype.kind == "i" else np.float64)
        if not np.array_equal(got, want, equal_nan=want.dtype.kind == "f"):
            disagree.add(name)
    for name in ("cpu", "webgpu", "opencl", "cuda"):
        backend = plugins.backends().get(name)
        if backend is not None:
            listed = ExpectedFailures.of_backend(backend).reasons
            assert {case for case in listed if case in cases} == disagree, name


@pytest.mark.parametrize("name", sorted(onnx_narrow_cast_cases()))
def test_onnx_cases_follow_the_specification(provider, name):
    """Every backend gives the specification's answer on the inputs of ONNX's cases."""
    x, target, saturate, _ = onnx_narrow_cast_cases()[name]
    kind = "CastLike" if name.startswith("test_castlike_") else "Cast"
    if kind == "Cast":
        feeds, onnx_model = {"x": x}, model("Cast", {"x": x}, target, to=code(target), saturate=int(saturate))
    else:
        feeds = {"x": x, "like": np.zeros(0, target)}
        onnx_model = model("CastLike", feeds, target, saturate=int(saturate))
    check(provider, onnx_model, feeds, spec.cast(x, target, saturate))
