"""Miscellaneous operators against the ONNX node tests, onnxruntime and onnx's reference
evaluator: CumProd, Det, BitCast, Scatter, TensorScatter, Shrink, LpNormalization, the random
generators, CausalConvWithState, the training optimizers and BatchNormalization in training.

Random generators cannot be compared by value: their node tests check element type and
shape, and the tests here check seeding, ranges and sample statistics with bounds of five
standard errors.

Also home of the helpers that run the ONNX backend node tests of an operator family.
"""

from __future__ import annotations

import functools
import warnings

import ml_dtypes
import numpy as np
import onnx
import pytest
import spawnml
from onnx import helper
from onnx.backend.test.case.test_case import TestCase
from onnx.backend.test.loader import load_model_tests
from onnx.reference import ReferenceEvaluator
from spawnml.errors import ShapeInferenceError
from spawnml.ops.defs.misc import TRAINING_DOMAIN

from tests.ops.conftest import assert_close, make_model

rng = np.random.default_rng(0)

#: Operators whose node tests can only check element type and shape.
RANDOM_OPS = {
    "Bernoulli",
    "Multinomial",
    "RandomUniform",
    "RandomUniformLike",
    "RandomNormal",
    "RandomNormalLike",
}


# ---------------------------------------------------------------------------- node tests


@functools.cache
def _all_node_cases() -> tuple[TestCase, ...]:
    with warnings.catch_warnings():  # generating the cases overflows casts on purpose
        warnings.simplefilter("ignore")
        return tuple(load_model_tests(kind="node"))


def node_cases(op_type: str) -> list[TestCase]:
    """The ONNX backend node tests whose graph has an ``op_type`` node at its top level."""
    return [case for case in _all_node_cases() if any(n.op_type == op_type for n in case.model.graph.node)]


def assert_node_case(case: TestCase) -> None:
    """Run one node test on SpawnML and compare with its expected outputs and tolerances."""
    session = spawnml.InferenceSession(case.model.SerializeToString(), providers=["cpu"])
    by_value = not any(node.op_type in RANDOM_OPS for node in case.model.graph.node)
    names = [value.name for value in case.model.graph.input]
    for inputs, expected in case.data_sets:
        got = session.run(None, dict(zip(names, inputs, strict=False)))
        for ours, want in zip(got, expected, strict=True):
            assert ours.dtype == want.dtype and ours.shape == want.shape, (case.name, ours.dtype, ours.shape)
            if by_value:
                np.testing.assert_allclose(
                    ours.astype(np.float64) if ours.dtype.kind == "V" else ours,
                    want.astype(np.float64) if want.dtype.kind == "V" else want,
                    rtol=case.rtol,
                    atol=case.atol,
                    err_msg=case.name,
                )


def assert_node_cases(op_type: str) -> None:
    cases = node_cases(op_type)
    assert cases, f"no ONNX node test runs {op_type}"
    for case in cases:
        assert_node_case(case)


MISC_OPS = [
    "CumProd",
    "Det",
    "BitCast",
    "Scatter",
    "TensorScatter",
    "Shrink",
    "LpNormalization",
    "Bernoulli",
    "RandomUniformLike",
    "CausalConvWithState",
    "Adagrad",
    "Momentum",
    "Adam",
    "BatchNormalization",
]


@pytest.mark.parametrize("op_type", MISC_OPS)
def test_node_cases(op_type):
    assert_node_cases(op_type)


# ---------------------------------------------------------------------------- helpers


def one_node(op: str, inputs: dict, constants=(), outputs=1, opset=17, domain="", **attrs):
    """A one-node model and its feeds; ``None`` inputs are omitted, ``constants`` become
    initializers."""
    feeds = {n: a for n, a in inputs.items() if a is not None and n not in constants}
    initializers = {n: inputs[n] for n in constants if inputs.get(n) is not None}
    model = make_model(op, feeds, outputs, opset, domain, initializers=initializers, **attrs)
    names = [name if a is not None else "" for name, a in inputs.items()]
    while names and not names[-1]:
        names.pop()
    model.graph.node[0].input[:] = names
    model.ir_version = 10 if opset >= 21 else 8
    return model, feeds


def run(check, op: str, inputs: dict, constants=(), outputs=1, opset=17, tolerance=None, **attrs):
    """Compare SpawnML with onnxruntime on a one-node model (see :func:`one_node`)."""
    return check(*one_node(op, inputs, constants, outputs, opset, **attrs), **(tolerance or {}))


def run_spawnml(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)


def check_reference(model: onnx.ModelProto, feeds: dict, rtol=1e-5, atol=1e-6) -> list[np.ndarray]:
    """Compare with onnx's reference evaluator, for what onnxruntime does not run."""
    ours = run_spawnml(model, feeds)
    assert_close(ours, ReferenceEvaluator(model).run(None, feeds), rtol, atol)
    return ours


def randn(*shape: int, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def refused(model: onnx.ModelProto, match: str) -> None:
    """The CPU session refuses ``model`` at load: its schema's rules (shape inference) or the
    kernel's own check, with a message matching ``match``."""
    with pytest.raises((spawnml.UnsupportedOperatorError, ShapeInferenceError), match=match):
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])


# ---------------------------------------------------------------------------- math


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint32])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cum_prod(check, dtype, axis, exclusive, reverse):
    signs = 1 if np.dtype(dtype).kind == "u" else rng.choice([-1, 1], (3, 4))
    inputs = {"x": (rng.integers(1, 4, (3, 4)) * signs).astype(dtype), "axis": np.array(axis, np.int32)}
    run(check, "CumProd", inputs, constants=("axis",), opset=26, exclusive=exclusive, reverse=reverse)


def test_cum_prod_float16_and_empty_axis(check):
    run(check, "CumProd", {"x": randn(2, 5, dtype=np.float16), "axis": np.array(1)}, opset=26, exclusive=1)
    run(check, "CumProd", {"x": randn(0, 3), "axis": np.array(0)}, opset=26, exclusive=1)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 1, 1), (0, 2, 2)])
def test_det(check, shape):
    run(check, "Det", {"x": randn(*shape)}, tolerance={"rtol": 1e-4, "atol": 1e-5})


def test_det_float64():
    model, feeds = one_node("Det", {"x": randn(3, 5, 5, dtype=np.float64)}, opset=22)
    check_reference(model, feeds, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int8, np.int32, np.uint8])
@pytest.mark.parametrize(("bias", "lambd"), [(0.0, 0.5), (1.5, 0.5), (-1.0, 2.0)])
def test_shrink(check, dtype, bias, lambd):
    x = rng.integers(0, 255, (4, 6)) if np.dtype(dtype).kind == "u" else randn(4, 6) * 4
    run(check, "Shrink", {"x": x.astype(dtype)}, opset=9, bias=bias, lambd=lambd)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lp_normalization(check, p, axis, dtype):
    x = randn(3, 4, 5, dtype=dtype)
    x[0, 0] = 0  # a zero vector normalizes to zeros
    run(check, "LpNormalization", {"x": x}, opset=1, p=p, axis=axis)


def test_lp_normalization_refuses_other_p():
    refused(one_node("LpNormalization", {"x": randn(2, 3)}, p=3)[0], "p must be 1 or 2")


# ---------------------------------------------------------------------------- bits and scatters


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (np.float32, onnx.TensorProto.INT32),
        (np.int64, onnx.TensorProto.DOUBLE),
        (np.float16, onnx.TensorProto.UINT16),
        (np.uint8, onnx.TensorProto.INT8),
    ],
)
def test_bit_cast(check, source, target):
    x = randn(2, 3) * 100 if np.dtype(source).kind == "f" else rng.integers(0, 100, (2, 3))
    run(check, "BitCast", {"x": x.astype(source)}, opset=26, to=target)


@pytest.mark.parametrize(
    ("x", "target"),
    [
        (np.array([[-1, 0, 3], [1, -8, 7]], ml_dtypes.int4), onnx.TensorProto.UINT4),
        (np.array([True, False, True]), onnx.TensorProto.UINT8),
        (np.array([0, 1, 1], np.int8), onnx.TensorProto.BOOL),
        (np.array([1 + 2j, -3.5j], np.complex64), onnx.TensorProto.UINT64),
    ],
    ids=["int4", "bool", "to-bool", "complex64"],
)
def test_bit_cast_reference(x, target):
    """Types onnxruntime's Python API cannot carry or its kernel does not take."""
    check_reference(*one_node("BitCast", {"x": x}, opset=26, to=target))


def test_bit_cast_width_mismatch_and_string():
    model, feeds = one_node("BitCast", {"x": randn(3)}, opset=26, to=onnx.TensorProto.INT64)
    with pytest.raises(spawnml.ExecutionError, match="widths differ"):
        run_spawnml(model, feeds)
    refused(one_node("BitCast", {"x": randn(3)}, opset=26, to=onnx.TensorProto.STRING)[0], "string")


@pytest.mark.parametrize("opset", [9, 10])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter(check, opset, axis):
    data = randn(3, 4)
    size = data.shape[axis]
    distinct = np.take(np.argsort(rng.random(data.shape), axis=axis), [0, 1], axis=axis)
    indices = np.where(rng.random(distinct.shape) < 0.5, distinct - size, distinct)  # some from the end
    updates = randn(*indices.shape)
    run(check, "Scatter", {"data": data, "indices": indices, "updates": updates}, opset=opset, axis=axis)


def test_scatter_is_deprecated_from_opset_11():
    model, _ = one_node("Scatter", {"d": randn(3), "i": np.array([0]), "u": randn(1)}, opset=11)
    refused(model, "Scatter")


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize(
    ("shape", "axis", "steps"), [((2, 3, 8, 4), -2, 2), ((2, 8, 5), 1, 3), ((3, 6), 1, 6)]
)
@pytest.mark.parametrize("indices", [True, False])
def test_tensor_scatter(check, mode, shape, axis, steps, indices):
    capacity = shape[axis]
    update_shape = list(shape)
    update_shape[axis] = steps
    starts = rng.integers(0, capacity if mode == "circular" else capacity - steps + 1, shape[0])
    inputs = {"past": randn(*shape), "update": randn(*update_shape), "at": starts if indices else None}
    run(check, "TensorScatter", inputs, opset=24, axis=axis, mode=mode)


def test_tensor_scatter_overrun_and_batch_axis():
    model, feeds = one_node(
        "TensorScatter", {"p": randn(2, 4), "u": randn(2, 2), "i": np.array([3, 0])}, opset=24, axis=1
    )
    with pytest.raises(spawnml.ExecutionError, match="overruns"):
        run_spawnml(model, feeds)
    refused(
        one_node("TensorScatter", {"p": randn(2, 4), "u": randn(1, 4)}, opset=24, axis=0)[0], "batch axis"
    )


# ---------------------------------------------------------------------------- random generators


def _draw(op: str, inputs: dict, opset: int = 22, **attrs) -> np.ndarray:
    return run_spawnml(*one_node(op, inputs, opset=opset, **attrs))[0]


def _within(samples: np.ndarray, mean: float, std: float) -> None:
    """The sample mean lies within five standard errors of ``mean``."""
    assert abs(samples.astype(np.float64).mean() - mean) <= 5 * std / np.sqrt(samples.size)


@pytest.mark.parametrize("dtype", [onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16])
def test_random_uniform(dtype):
    y = _draw("RandomUniform", {}, dtype=dtype, low=-2.0, high=3.0, shape=[100, 200], seed=7.0)
    assert y.dtype == helper.tensor_dtype_to_np_dtype(dtype) and y.shape == (100, 200)
    assert y.min() >= -2 and y.max() <= 3
    _within(y, 0.5, 5 / np.sqrt(12))
    assert np.array_equal(
        y, _draw("RandomUniform", {}, dtype=dtype, low=-2.0, high=3.0, shape=[100, 200], seed=7.0)
    )


def test_random_normal_and_likes():
    y = _draw("RandomNormal", {}, mean=1.5, scale=2.0, shape=[20000], seed=1.0)
    assert y.dtype == np.float32 and y.shape == (20000,)
    _within(y, 1.5, 2.0)
    assert abs(y.std() - 2.0) < 0.05
    like = _draw("RandomNormalLike", {"x": np.zeros((3, 4), np.float64)}, seed=3.0)
    assert like.dtype == np.float64 and like.shape == (3, 4)
    uniform = _draw("RandomUniformLike", {"x": np.zeros((5,), np.int32)}, dtype=onnx.TensorProto.FLOAT)
    assert uniform.dtype == np.float32 and uniform.shape == (5,) and ((uniform >= 0) & (uniform < 1)).all()


def test_random_unseeded_runs_differ_and_seeds_differ():
    model, _ = one_node("RandomUniform", {}, opset=22, shape=[64])
    session = spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])
    assert not np.array_equal(session.run(None, {})[0], session.run(None, {})[0])
    first = _draw("RandomUniform", {}, shape=[64], seed=1.0)
    assert not np.array_equal(first, _draw("RandomUniform", {}, shape=[64], seed=2.0))


def test_random_refusals():
    refused(one_node("RandomUniform", {}, opset=22, shape=[2], dtype=onnx.TensorProto.INT32)[0], "dtype")
    refused(one_node("RandomNormal", {}, opset=22, shape=[2, -1])[0], "negative")
    model, feeds = one_node("RandomNormalLike", {"x": np.zeros(3, np.int64)}, opset=22)
    with pytest.raises(spawnml.ExecutionError, match="floating-point"):
        run_spawnml(model, feeds)


@pytest.mark.parametrize(
    "dtype", [None, onnx.TensorProto.INT32, onnx.TensorProto.BOOL, onnx.TensorProto.DOUBLE]
)
def test_bernoulli(dtype):
    p = np.linspace(0, 1, 11, dtype=np.float32)[:, None].repeat(4000, axis=1)
    attrs = {} if dtype is None else {"dtype": dtype}
    y = _draw("Bernoulli", {"p": p}, seed=5.0, **attrs)
    assert y.dtype == (np.float32 if dtype is None else helper.tensor_dtype_to_np_dtype(dtype))
    assert y.shape == p.shape and set(np.unique(y.astype(np.float64))) <= {0.0, 1.0}
    assert (y[0] == 0).all() and (y[-1] == 1).all()
    for row, chance in zip(y[1:-1], p[1:-1, 0], strict=True):
        _within(row, chance, np.sqrt(chance * (1 - chance)))


@pytest.mark.parametrize("dtype", [onnx.TensorProto.INT32, onnx.TensorProto.INT64])
def test_multinomial(dtype):
    probabilities = np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]])
    logits = np.log(np.maximum(probabilities, 1e-30)).astype(np.float32)
    y = _draw("Multinomial", {"x": logits}, opset=7, sample_size=20000, seed=2.0, dtype=dtype)
    assert y.dtype == helper.tensor_dtype_to_np_dtype(dtype) and y.shape == (2, 20000)
    for row, chances in zip(y, probabilities, strict=True):
        for kind, chance in enumerate(chances):
            _within(row == kind, chance, np.sqrt(chance * (1 - chance)))


def test_multinomial_refusals():
    refused(one_node("Multinomial", {"x": randn(1, 3)}, opset=7, dtype=onnx.TensorProto.FLOAT)[0], "dtype")
    refused(one_node("Multinomial", {"x": randn(1, 3)}, opset=7, sample_size=-2)[0], "sample_size")


# ---------------------------------------------------------------------------- convolution with state


@pytest.mark.parametrize("kernel", [1, 2, 4])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("past", [False, True])
@pytest.mark.parametrize("activation", ["none", "silu", "swish"])
def test_causal_conv_with_state(check, kernel, bias, past, activation):
    inputs = {
        "x": randn(2, 3, 5),
        "w": randn(3, 1, kernel),
        "b": randn(3) if bias else None,
        "s": randn(2, 3, kernel - 1) if past else None,
    }
    run(check, "CausalConvWithState", inputs, outputs=2, opset=27, activation=activation)


def test_causal_conv_with_state_float16(check):
    inputs = {"x": randn(1, 4, 6, dtype=np.float16), "w": randn(4, 1, 3, dtype=np.float16)}
    run(check, "CausalConvWithState", inputs, outputs=2, opset=27, tolerance={"rtol": 1e-2, "atol": 1e-2})


# ---------------------------------------------------------------------------- training


def _optimizer(op: str, count: int, states: int, **attrs) -> tuple[onnx.ModelProto, dict]:
    inputs = {"r": np.array(0.1, np.float32), "t": np.array(3, np.int64)}
    for role in ["x", "g", *(f"s{k}" for k in range(states))]:
        for i in range(count):
            inputs[f"{role}{i}"] = np.abs(randn(3, 2)) if role.startswith("s") else randn(3, 2)
    return one_node(op, inputs, outputs=count * (1 + states), domain=TRAINING_DOMAIN, **attrs)


@pytest.mark.parametrize("count", [1, 2])
def test_adagrad(count):
    check_reference(*_optimizer("Adagrad", count, 1, decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.01))


@pytest.mark.parametrize("count", [1, 3])
@pytest.mark.parametrize("mode", ["standard", "nesterov"])
def test_momentum(count, mode):
    check_reference(*_optimizer("Momentum", count, 1, alpha=0.9, beta=0.5, mode=mode, norm_coefficient=0.02))


@pytest.mark.parametrize("count", [2, 3])  # the reference returns float64 for one tensor
def test_adam(count):
    model, feeds = _optimizer(
        "Adam", count, 2, alpha=0.8, beta=0.95, norm_coefficient=0.01, norm_coefficient_post=0.1
    )
    check_reference(model, feeds)


def test_momentum_refuses_unknown_mode():
    refused(_optimizer("Momentum", 1, 1, alpha=0.9, beta=0.5, mode="heavy", norm_coefficient=0.0)[0], "mode")


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("momentum", [0.9, 0.5])
def test_batch_norm_training(check, shape, momentum):
    channels = shape[1]
    inputs = {
        "x": randn(*shape),
        "scale": randn(channels),
        "bias": randn(channels),
        "mean": randn(channels),
        "var": np.abs(randn(channels)),
    }
    tolerance = {"rtol": 1e-4, "atol": 1e-5}
    run(
        check,
        "BatchNormalization",
        inputs,
        outputs=3,
        opset=15,
        tolerance=tolerance,
        training_mode=1,
        momentum=momentum,
    )


def test_batch_norm_training_before_opset_14_is_refused():
    inputs = {n: randn(3) for n in ("x", "s", "b", "m", "v")}
    refused(one_node("BatchNormalization", inputs, outputs=3, opset=9)[0], "before opset 14")
