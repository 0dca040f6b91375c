"""Elementwise operators against onnxruntime: math and activations, arithmetic, comparison,
logic and bitwise operators, Clip, Where and the casts.

Tolerances: float16 results may differ by one unit in the last place (2**-10 relative);
float32 by a few ulps, since onnxruntime evaluates exp/tanh/erf with vectorised
approximations; float64 agrees to 1e-12. Integer and boolean results must be equal.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import helper

from tests.ops.conftest import make_model, run_both

F16, F32, F64 = np.float16, np.float32, np.float64
I8, U8, I32, I64, U32, U64 = np.int8, np.uint8, np.int32, np.int64, np.uint32, np.uint64
FLOATS = (F32, F16, F64)
NUMBERS = (*FLOATS, I32, I64)
TOLERANCE = {F16: (1e-3, 1e-4), F32: (1e-5, 1e-6), F64: (1e-12, 1e-12)}
SPECIALS = (np.nan, np.inf, -np.inf, -0.0, 0.0)


#: onnxruntime evaluates these in float64 through their ONNX function bodies, whose
#: constants (1/6; sqrt(2/pi) and 0.044715) are float32.
FLOAT32_CONSTANTS = {("HardSwish", F64): (1e-6, 1e-7), ("Gelu", F64): (1e-6, 1e-7)}


def tolerance(dtype, op: str = "") -> dict[str, float]:
    key = np.dtype(dtype).type
    rtol, atol = FLOAT32_CONSTANTS.get((op, key)) or TOLERANCE.get(key, (0, 0))
    return {"rtol": rtol, "atol": atol}


def floats(dtype, shape=(3, 5), low=-3.0, high=3.0, seed=0) -> np.ndarray:
    """Uniform values with NaN, ±inf and ±0 in the first places."""
    values = np.random.default_rng(seed).uniform(low, high, size=shape)
    values.flat[: min(values.size, len(SPECIALS))] = SPECIALS[: values.size]
    return values.astype(dtype)


def integers(dtype, shape=(3, 5), low=-9, high=10, seed=0, nonzero=False) -> np.ndarray:
    info = np.iinfo(dtype)
    values = np.random.default_rng(seed).integers(max(low, info.min), min(high, info.max), size=shape)
    if nonzero:
        values[values == 0] = 1
    return values.astype(dtype)


def data(dtype, shape=(3, 5), seed=0, **kwargs) -> np.ndarray:
    if np.dtype(dtype) == np.bool_:
        return np.random.default_rng(seed).integers(0, 2, size=shape).astype(bool)
    if np.issubdtype(dtype, np.integer):
        return integers(dtype, shape, seed=seed, **kwargs)
    return floats(dtype, shape, seed=seed)


# Unary -----------------------------------------------------------------------------------

F16_32 = (F32, F16)  # onnxruntime has no float64 kernel for these
#: At opset 18 onnxruntime runs the float64 activations through their ONNX function bodies.
UNARY = [
    ("Abs", 18, (*NUMBERS, I8, U8), {}),
    ("Neg", 18, (*NUMBERS, I8), {}),
    ("Exp", 18, FLOATS, {}),
    ("Log", 18, FLOATS, {}),
    ("Sqrt", 18, FLOATS, {}),
    ("Reciprocal", 18, FLOATS, {}),
    ("Floor", 18, FLOATS, {}),
    ("Ceil", 18, FLOATS, {}),
    ("Round", 18, FLOATS, {}),
    ("Sign", 18, (*NUMBERS, U8), {}),
    ("Sin", 18, FLOATS, {}),
    ("Cos", 18, FLOATS, {}),
    ("Tan", 18, F16_32, {}),
    ("Asin", 18, F16_32, {}),
    ("Acos", 18, F16_32, {}),
    ("Atan", 18, F16_32, {}),
    ("Sinh", 18, F16_32, {}),
    ("Cosh", 18, F16_32, {}),
    ("Asinh", 18, F16_32, {}),
    ("Acosh", 18, F16_32, {}),
    ("Atanh", 18, F16_32, {}),
    ("Erf", 18, F16_32, {}),
    ("Tanh", 18, FLOATS, {}),
    ("Sigmoid", 18, FLOATS, {}),
    ("Relu", 18, (*NUMBERS, I8), {}),
    ("LeakyRelu", 18, FLOATS, {}),
    ("LeakyRelu", 18, FLOATS, {"alpha": 0.3}),
    ("Elu", 18, FLOATS, {}),
    ("Elu", 18, FLOATS, {"alpha": 0.5}),
    ("Selu", 18, FLOATS, {}),
    ("Selu", 18, FLOATS, {"alpha": 2.0, "gamma": 0.5}),
    ("Celu", 18, (F32,), {}),
    ("Celu", 18, (F32,), {"alpha": 2.0}),
    ("ThresholdedRelu", 18, FLOATS, {}),
    ("ThresholdedRelu", 18, FLOATS, {"alpha": -0.5}),
    ("HardSigmoid", 18, FLOATS, {}),
    ("HardSigmoid", 18, FLOATS, {"alpha": 0.5, "beta": 0.25}),
    ("HardSwish", 18, FLOATS, {}),
    ("Softplus", 18, FLOATS, {}),
    ("Softsign", 18, FLOATS, {}),
    ("Gelu", 20, F16_32, {}),
    ("Gelu", 20, FLOATS, {"approximate": "tanh"}),
    ("Mish", 18, FLOATS, {}),
    ("IsNaN", 18, FLOATS, {}),
    ("IsInf", 18, (F32, F64), {}),
    ("IsInf", 18, (F32, F64), {"detect_negative": 0}),
    ("IsInf", 18, (F32, F64), {"detect_positive": 0}),
    ("Not", 18, (np.bool_,), {}),
    ("BitwiseNot", 18, (I8, U8, I32, I64, U32, U64), {}),
]


def _cases(table) -> list:
    return [
        pytest.param(
            op,
            opset,
            dtype,
            attrs,
            id="-".join([op, f"v{opset}", np.dtype(dtype).name, *(f"{k}={v}" for k, v in attrs.items())]),
        )
        for op, opset, dtypes, attrs in table
        for dtype in dtypes
    ]


@pytest.mark.parametrize(("op", "opset", "dtype", "attrs"), _cases(UNARY))
def test_unary(check, op, opset, dtype, attrs):
    x = data(dtype, (3, 5), low=-50, high=50) if np.issubdtype(dtype, np.integer) else data(dtype)
    if op == "Sign" and dtype == F16:
        x[np.isnan(x)] = 1.5  # onnxruntime's float16 Sign gives 0 for NaN, its float32 and float64 NaN
    check(make_model(op, {"x": x}, opset=opset, **attrs), {"x": x}, **tolerance(dtype, op))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["Exp", "Tanh", "Sigmoid", "Softplus", "Elu", "Selu", "Mish", "Erf", "Gelu"])
def test_unary_large_magnitudes(check, op, dtype):
    """Far from zero the activations must saturate, not overflow to NaN."""
    if dtype == F64 and op in ("Erf", "Gelu"):
        pytest.skip("onnxruntime has no float64 kernel")
    if dtype != F32 and op == "Softplus":
        pytest.skip("onnxruntime's float16 and float64 Softplus compute log(exp(x) + 1), which overflows")
    x = np.array([-1e4, -100, -30, -10, 10, 30, 100, 1e4], dtype=dtype)
    check(make_model(op, {"x": x}, opset=20 if op == "Gelu" else 18), {"x": x}, **tolerance(dtype))


# Clip --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", F16_32)
@pytest.mark.parametrize("bounds", [{}, {"min": -1.0}, {"max": 0.5}, {"min": -1.0, "max": 0.5}])
def test_clip_attributes(check, dtype, bounds):
    x = data(dtype)
    check(make_model("Clip", {"x": x}, opset=6, **bounds), {"x": x}, **tolerance(dtype))


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("dtype", [*FLOATS, I32, I64, U8])
@pytest.mark.parametrize("given", ["both", "min", "max", "none", "crossed"])
def test_clip_inputs(check, opset, dtype, given):
    if opset == 11 and dtype != F32:
        pytest.skip("onnxruntime's Clip 11 runs float32 only (float16 through float32, with its limits)")
    x = data(dtype, low=0, high=20) if np.issubdtype(dtype, np.integer) else data(dtype)
    low, high = (np.array(6 if given == "crossed" else 2, dtype=dtype), np.array(4, dtype=dtype))
    named = {"both": ["x", "low", "high"], "min": ["x", "low"], "max": ["x", "", "high"], "none": ["x"]}
    model = make_model("Clip", {"x": x}, opset=opset, initializers={"low": low, "high": high})
    model.graph.node[0].input[:] = named.get(given, ["x", "low", "high"])
    check(model, {"x": x}, **tolerance(dtype))


# Binary and variadic -------------------------------------------------------------------

SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((0, 3), (1, 3))]
BINARY = [
    ("Add", 14, (*NUMBERS, I8, U8, U64), {}),
    ("Sub", 14, (*NUMBERS, I8, U8, U64), {}),
    ("Mul", 14, (*NUMBERS, I8, U8, U64), {}),
    ("Div", 14, (*NUMBERS, I8, U8, U64), {}),
    ("Pow", 15, NUMBERS, {}),
    ("Mod", 13, (I8, U8, I32, I64, U64), {}),
    ("Mod", 13, (*NUMBERS, I8, U8), {"fmod": 1}),
    ("Mod", 28, FLOATS, {}),
    ("Max", 13, (*NUMBERS, I8, U8, U64), {}),
    ("Min", 13, (*NUMBERS, I8, U8, U64), {}),
    ("Sum", 13, FLOATS, {}),
    ("Mean", 13, F16_32, {}),
    ("Equal", 19, (*NUMBERS, np.bool_), {}),
    ("Less", 13, (*NUMBERS, U8), {}),
    ("Greater", 13, (*NUMBERS, U8), {}),
    ("LessOrEqual", 16, NUMBERS, {}),
    ("GreaterOrEqual", 16, NUMBERS, {}),
    ("And", 7, (np.bool_,), {}),
    ("Or", 7, (np.bool_,), {}),
    ("Xor", 7, (np.bool_,), {}),
    ("BitShift", 11, (U8, U32, U64), {"direction": "LEFT"}),
    ("BitShift", 11, (U8, U32, U64), {"direction": "RIGHT"}),
    ("BitwiseAnd", 18, (I8, U8, I32, I64, U64), {}),
    ("BitwiseOr", 18, (I8, U8, I32, I64, U64), {}),
    ("BitwiseXor", 18, (I8, U8, I32, I64, U64), {}),
    ("PRelu", 16, (*NUMBERS,), {}),
]


def binary_operands(op, dtype, shapes, attrs) -> tuple[np.ndarray, np.ndarray]:
    """Operands in each operator's domain: no zero divisors, small powers and shifts."""
    a_shape, b_shape = shapes
    if op == "BitShift":
        return integers(dtype, a_shape, 0, 200), integers(dtype, b_shape, 0, 8 * np.dtype(dtype).itemsize, 1)
    if op == "Pow" and np.issubdtype(dtype, np.integer):
        return integers(dtype, a_shape, -4, 5), integers(dtype, b_shape, 0, 6, 1)
    if op == "Pow":
        return floats(dtype, a_shape, 0, 3), floats(dtype, b_shape, -2, 2, 1)
    divides = op in ("Div", "Mod")
    return data(dtype, a_shape), data(dtype, b_shape, seed=1, nonzero=divides)


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize(("op", "opset", "dtype", "attrs"), _cases(BINARY))
def test_binary(check, op, opset, dtype, attrs, shapes):
    a, b = binary_operands(op, dtype, shapes, attrs)
    check(make_model(op, {"a": a, "b": b}, opset=opset, **attrs), {"a": a, "b": b}, **tolerance(dtype))


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize(
    "op", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Equal", "Less", "LessOrEqual"]
)
def test_binary_special_values(check, op, dtype):
    """Every pair of NaN, ±inf, ±0 and ordinary values."""
    values = np.array([*SPECIALS, 1.5, -2.0], dtype=dtype)
    a, b = (grid.reshape(-1) for grid in np.meshgrid(values, values))
    model = make_model(op, {"a": a, "b": b}, opset=16, **({"fmod": 1} if op == "Mod" else {}))
    check(model, {"a": a, "b": b}, **tolerance(dtype))


@pytest.mark.parametrize(
    ("op", "feeds"),
    [
        ("Neg", {"x": np.array([0.0, -0.0], F32)}),
        ("Mul", {"a": np.array([-0.0, 0.0, -1.0], F32), "b": np.array([1.0, -1.0, 0.0], F32)}),
        ("Mod", {"a": np.array([-0.0, 0.0, -4.0], F32), "b": np.array([2.0, -2.0, 2.0], F32)}),
        ("Round", {"x": np.array([-0.4, -0.0, 0.4], F32)}),
        ("Ceil", {"x": np.array([-0.5, -0.0], F32)}),
    ],
)
def test_signed_zeros(op, feeds):
    """Where the result is a zero, its sign matches onnxruntime's."""
    attrs = {"fmod": 1} if op == "Mod" else {}
    ours, reference = run_both(make_model(op, feeds, opset=13, **attrs), feeds)
    np.testing.assert_array_equal(ours[0], reference[0])
    np.testing.assert_array_equal(np.signbit(ours[0]), np.signbit(reference[0]))


@pytest.mark.parametrize("dtype", [I32, I64, I8])
def test_integer_division_truncates(check, dtype):
    a = np.array([7, -7, 7, -7, 0, 1, -1, 9], dtype=dtype)
    b = np.array([2, 2, -2, -2, 3, -5, 5, 3], dtype=dtype)
    check(make_model("Div", {"a": a, "b": b}, opset=14), {"a": a, "b": b})
    for fmod in (0, 1):
        check(make_model("Mod", {"a": a, "b": b}, opset=13, fmod=fmod), {"a": a, "b": b})


@pytest.mark.parametrize(
    ("base", "exponent"), [(I32, I32), (I64, I64), (I32, F32), (F32, I64), (F16, F32), (F64, I32)]
)
def test_pow_keeps_base_type(check, base, exponent):
    x = np.array([2, 3, -2, 1, -1, 0, 5], dtype=base)
    y = np.array([-1, 2, 3, -3, -3, 2, 0.5 if np.issubdtype(exponent, np.floating) else 1], dtype=exponent)
    check(make_model("Pow", {"x": x, "y": y}, opset=15), {"x": x, "y": y}, **tolerance(base))


def test_bitshift_by_whole_width(check):
    x = np.array([1, 255, 128, 7], dtype=U8)
    y = np.array([0, 7, 8, 3], dtype=U8)
    for direction in ("LEFT", "RIGHT"):
        check(make_model("BitShift", {"x": x, "y": y}, opset=11, direction=direction), {"x": x, "y": y})


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("shapes", [[(3, 4)], [(3, 4), (4,)], [(2, 1, 4), (3, 1), ()], [(2, 3)] * 4], ids=str)
def test_variadic(check, op, shapes):
    feeds = {f"x{i}": floats(F32, shape, seed=i) for i, shape in enumerate(shapes)}
    check(make_model(op, feeds, opset=13), feeds)


@pytest.mark.parametrize("dtype", [*NUMBERS, U8])
def test_where(check, dtype):
    feeds = {"c": data(np.bool_, (3, 1)), "x": data(dtype, (1, 4)), "y": data(dtype, (3, 4), seed=2)}
    check(make_model("Where", feeds, opset=16), feeds, **tolerance(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_prelu_slope_broadcast(check, dtype):
    feeds = {"x": floats(dtype, (2, 3, 4)), "slope": floats(dtype, (3, 1), 0, 1, seed=1)}
    check(make_model("PRelu", feeds, opset=16), feeds, **tolerance(dtype))


def test_equal_strings(check):
    feeds = {"a": np.array(["a", "b", "", "é"], object), "b": np.array(["a", "c", "", "é"], object)}
    check(make_model("Equal", feeds, opset=19), feeds)


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "axis"), [((2, 3, 4), (3, 4), None), ((2, 3, 4), (3,), 1), ((2, 3, 4), (2,), 0)]
)
@pytest.mark.parametrize(("op", "numpy_op"), [("Add", np.add), ("Mul", np.multiply), ("Less", np.less)])
def test_legacy_broadcast(op, numpy_op, a_shape, b_shape, axis):
    """Before opset 7 ``broadcast=1`` lays B on A's dimensions starting at ``axis``."""
    rng = np.random.default_rng(0)
    a, b = rng.uniform(1, 2, a_shape).astype(F32), rng.uniform(1, 2, b_shape).astype(F32)
    attrs = {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}
    (got,) = run_ours(make_model(op, {"a": a, "b": b}, opset=6, **attrs), {"a": a, "b": b})
    first = len(a_shape) - len(b_shape) if axis is None else axis
    aligned = b.reshape(b_shape + (1,) * (len(a_shape) - first - len(b_shape)))
    np.testing.assert_array_equal(got, numpy_op(a, aligned))


def run_ours(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list:
    return spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("Relu", {}),
        ("Exp", {}),
        ("LeakyRelu", {"alpha": 0.2}),
        ("Selu", {"alpha": 1.5, "gamma": 1.25}),
        ("Clip", {"min": -1.0, "max": 0.5}),
    ],
)
def test_opset1_consumed_inputs(op, attrs):
    """Opset 1's obsolete ``consumed_inputs`` is accepted and changes nothing."""
    x = floats(F32)
    (got,) = run_ours(make_model(op, {"x": x}, opset=1, consumed_inputs=[0], **attrs), {"x": x})
    data = make_model(op, {"x": x}, opset=6, **attrs).SerializeToString()
    (want,) = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


# Casts -------------------------------------------------------------------------------

CAST_TYPES = [F32, F16, F64, I8, U8, np.int16, I32, I64, U32, U64, np.bool_]


def cast_model(x: np.ndarray, target) -> onnx.ModelProto:
    return make_model("Cast", {"x": x}, opset=13, to=helper.np_dtype_to_tensor_dtype(np.dtype(target)))


def cast_source(dtype) -> np.ndarray:
    """Values every target type holds: in range, no NaN for integer targets."""
    if np.dtype(dtype) == np.bool_:
        return np.array([True, False, True])
    values = np.array([0, 1, 2.75, -0.0, 100.5, -3.5, 127, 7], dtype=np.float64)
    if np.issubdtype(dtype, np.unsignedinteger):
        values = np.abs(values)
    return values.astype(dtype)


@pytest.mark.parametrize("target", CAST_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("source", CAST_TYPES, ids=lambda t: np.dtype(t).name)
def test_cast(check, source, target):
    x = cast_source(source)
    if np.issubdtype(source, np.floating) and np.issubdtype(target, np.unsignedinteger):
        x = np.abs(x)
    check(cast_model(x, target), {"x": x})
    like = np.zeros(1, dtype=target)
    check(make_model("CastLike", {"x": x}, opset=15, initializers={"like": like}), {"x": x})


@pytest.mark.parametrize("source", [F32, F16, F64])
@pytest.mark.parametrize("target", [F16, F32, np.bool_])
def test_cast_special_values(check, source, target):
    with np.errstate(over="ignore"):
        x = np.array([*SPECIALS, 1e30, -1e-30, 65520.0]).astype(source)
    check(cast_model(x, target), {"x": x})


def test_cast_integer_wraps(check):
    x = np.array([200, -200, 300, 65535, -1, 2**31 - 1], dtype=I64)
    for target in (I8, U8, np.int16, U32):
        check(cast_model(x, target), {"x": x})


@pytest.mark.parametrize("source", [F32, F64, F16, I32, I64, np.bool_])
def test_cast_to_string(check, source):
    if np.issubdtype(source, np.floating):
        with np.errstate(over="ignore"):
            x = np.array([1.5, 0.1, 1e20, 3.14159265, 1e-7, 100, 123456789, *SPECIALS]).astype(source)
    else:
        x = cast_source(source)
    check(cast_model(x, object), {"x": x})


@pytest.mark.parametrize("target", [F32, F64, F16, I32, I64])
def test_cast_from_string(check, target):
    x = np.array(["1.5", "-2", "1e3", "0", "7"], dtype=object)
    if not np.issubdtype(target, np.floating):
        x = np.array(["1", "-2", "1000", "0", "7"], dtype=object)
    check(cast_model(x, target), {"x": x})


def test_cast_from_special_strings(check):
    x = np.array(["INF", "-inf", "+INF", "NaN", "1E8", "-1e-5"], dtype=object)
    check(cast_model(x, F32), {"x": x})


def round_trip_model(via: int, opset: int, size: int, **attrs) -> onnx.ModelProto:
    """float32 -> ``via`` -> float32, since onnxruntime cannot hand back the narrow types."""
    nodes = [
        helper.make_node("Cast", ["x"], ["narrow"], to=via, **attrs),
        helper.make_node("Cast", ["narrow"], ["y"], to=onnx.TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "round_trip",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [size])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [size])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


NARROW_VALUES = np.array(
    [
        0.0,
        -0.0,
        1.0,
        1.0625,
        1.1875,
        3.3,
        -17.0,
        0.001,
        1e-6,
        240.0,
        250.0,
        448.0,
        450.0,
        464.0,
        500.0,
        1000.0,
        57344.0,
        60000.0,
        70000.0,
        1e30,
        -1e30,
        np.inf,
        -np.inf,
        np.nan,
    ],
    dtype=F32,
)


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("opset", [19, 24])
@pytest.mark.parametrize(
    "via",
    [
        onnx.TensorProto.FLOAT8E4M3FN,
        onnx.TensorProto.FLOAT8E4M3FNUZ,
        onnx.TensorProto.FLOAT8E5M2,
        onnx.TensorProto.FLOAT8E5M2FNUZ,
    ],
    ids=["e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz"],
)
def test_cast_float8(check, via, opset, saturate):
    model = round_trip_model(via, opset, NARROW_VALUES.size, saturate=saturate)
    check(model, {"x": NARROW_VALUES}, rtol=0, atol=0)


def test_cast_bfloat16(check):
    x = np.concatenate([NARROW_VALUES, np.float32([1.00390625, 1.01171875, 3.4e38])])
    check(round_trip_model(onnx.TensorProto.BFLOAT16, 13, x.size), {"x": x}, rtol=0, atol=0)


# Refused at load ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "feeds", "attrs", "opset"),
    [
        ("Gelu", {"x": np.ones(2, F32)}, {"approximate": "erf"}, 20),
        ("BitShift", {"x": np.ones(2, U8), "y": np.ones(2, U8)}, {"direction": "UP"}, 11),
        ("Cast", {"x": np.ones(2, F32)}, {"to": onnx.TensorProto.COMPLEX64}, 13),
        ("Cast", {"x": np.ones(2, F32)}, {"to": onnx.TensorProto.FLOAT8E8M0}, 24),
    ],
    ids=["gelu-approximate", "bitshift-direction", "cast-complex", "cast-float8e8m0"],
)
def test_refused_at_load(op, feeds, attrs, opset):
    model = make_model(op, feeds, opset=opset, **attrs)
    with pytest.raises(spawnml.UnsupportedOperatorError, match=op):
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])


def test_float_mod_needs_fmod_before_opset_28():
    feeds = {"a": np.ones(2, F32), "b": np.ones(2, F32)}
    with pytest.raises(spawnml.InvalidGraphError, match="fmod"):
        graph = spawnml.load(make_model("Mod", feeds, opset=13).SerializeToString())
        spawnml.passes.infer_shapes(graph)


# Shape inference -----------------------------------------------------------------------


def symbolic_model(op: str, shapes: dict[str, tuple], opset: int = 19, **attrs) -> onnx.ModelProto:
    """A one-node model whose inputs have the given dims, symbols included (float32; bool for ``c``)."""
    feeds = {
        name: np.zeros(
            [dim if isinstance(dim, int) else 1 for dim in shape], np.bool_ if name == "c" else F32
        )
        for name, shape in shapes.items()
    }
    model = make_model(op, feeds, opset=opset, **attrs)
    for value, shape in zip(model.graph.input, shapes.values(), strict=True):
        for dim, size in zip(value.type.tensor_type.shape.dim, shape, strict=True):
            if isinstance(size, str):
                dim.dim_param = size
    return model


@pytest.mark.parametrize(
    ("op", "shapes", "attrs", "dtype", "shape"),
    [
        ("Add", {"a": ("batch", "seq"), "b": ("seq",)}, {}, F32, ("batch", "seq")),
        ("Add", {"a": ("batch", 1), "b": (3,)}, {}, F32, ("batch", 3)),
        ("Mul", {"a": ("n",), "b": ("m",)}, {}, F32, (None,)),
        ("Less", {"a": ("n", 1, 4), "b": (3, 1)}, {}, np.bool_, ("n", 3, 4)),
        ("Where", {"c": ("n", 1), "x": (1, "m"), "y": ()}, {}, F32, ("n", "m")),
        ("Max", {"a": ("n", 1), "b": (1, 2), "d": ()}, {}, F32, ("n", 2)),
        ("IsNaN", {"x": ("n", 2)}, {}, np.bool_, ("n", 2)),
        ("Gelu", {"x": ("n", 2)}, {}, F32, ("n", 2)),
        ("Cast", {"x": ("n", 2)}, {"to": onnx.TensorProto.INT64}, np.int64, ("n", 2)),
        ("CastLike", {"x": ("n", 2), "c": (1,)}, {}, np.bool_, ("n", 2)),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_symbolic_shape_inference(op, shapes, attrs, dtype, shape):
    model = symbolic_model(op, shapes, opset=20, **attrs)
    types = spawnml.passes.infer_shapes(spawnml.load(model.SerializeToString()))
    assert types["y0"] == (np.dtype(dtype), shape)
