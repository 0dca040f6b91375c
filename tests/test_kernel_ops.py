"""The generated and library GPU kernels of the elementwise, reduction, indexing and row
operators, rendered and run on WebGPU and OpenCL against numpy.

Tolerances: exact for data movement, comparisons, indices and integer arithmetic; ``1e-6``
relative for one float32 rounding; ``rtol=1e-5, atol=1e-6`` for reductions and for the
functions GPUs compute in a few ulp (exp, log, tanh, trigonometric and hyperbolic functions,
activations); ``5e-5`` relative for Asin and Acos. Skips with the availability reason where
a backend has no device.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from spawnml.backend import KernelContext
from spawnml.ir import Node

from tests.backends import GPU_BACKENDS, backend_or_skip

RNG = np.random.default_rng(5)


@pytest.fixture(scope="module", params=GPU_BACKENDS)
def gpu(request):
    return backend_or_skip(request.param)


def run(gpu, op, *inputs, opset=18, outputs=1, **attrs):
    """The GPU table's kernel for ``op`` on host inputs, read back (a list for several outputs)."""
    spec = gpu.kernels.find("", op, opset)
    assert spec is not None, f"no {gpu.name} kernel for {op}"
    ctx = KernelContext(Node(op, [], [f"y{i}" for i in range(outputs)]), opset, attrs, gpu)
    out = spec.fn(ctx, *[None if x is None else gpu.from_numpy(np.asarray(x)) for x in inputs])
    return [gpu.to_numpy(o) for o in out] if isinstance(out, tuple) else gpu.to_numpy(out)


def f32(*shape, scale=2.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def softplus(x):
    return np.logaddexp(0, x.astype(np.float64))


SELU_ALPHA, SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875
UNARY = {
    "Sin": (np.sin, {}),
    "Cos": (np.cos, {}),
    "Tan": (np.tan, {}),
    "Asin": (np.arcsin, {}),
    "Acos": (np.arccos, {}),
    "Atan": (np.arctan, {}),
    "Sinh": (np.sinh, {}),
    "Cosh": (np.cosh, {}),
    "Asinh": (np.arcsinh, {}),
    "Acosh": (np.arccosh, {}),
    "Atanh": (np.arctanh, {}),
    "Ceil": (np.ceil, {}),
    "Floor": (np.floor, {}),
    "Round": (np.round, {}),  # half to even, like numpy
    "Softplus": (softplus, {}),
    "Softsign": (lambda x: x / (1 + np.abs(x)), {}),
    "Mish": (lambda x: x * np.tanh(softplus(x)), {}),
    "HardSwish": (lambda x: x * np.clip(x / 6 + 0.5, 0, 1), {}),
    "HardSigmoid": (lambda x: np.clip(0.3 * x + 0.4, 0, 1), {"alpha": 0.3, "beta": 0.4}),
    "LeakyRelu": (lambda x: np.where(x < 0, 0.1 * x, x), {"alpha": 0.1}),
    "Elu": (lambda x: np.where(x < 0, 0.5 * np.expm1(x.astype(np.float64)), x), {"alpha": 0.5}),
    "Selu": (lambda x: SELU_GAMMA * np.where(x <= 0, SELU_ALPHA * np.expm1(x.astype(np.float64)), x), {}),
    "Celu": (lambda x: np.where(x > 0, x, 2 * np.expm1(x.astype(np.float64) / 2)), {"alpha": 2.0}),
    "ThresholdedRelu": (lambda x: np.where(x > 1.5, x, 0), {"alpha": 1.5}),
    "Gelu": (lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))), {}),
    "Shrink": (lambda x: np.where(x < -1, x + 0.5, np.where(x > 1, x - 0.5, 0)), {"lambd": 1.0, "bias": 0.5}),
    "Tanh": (np.tanh, {}),
}
DOMAINS = {"Asin": 0.99, "Acos": 0.99, "Atanh": 0.99}
#: Inverse sines and cosines go through the GPU's atan, within 2e-5 of numpy on lavapipe.
RTOL = {"Asin": 5e-5, "Acos": 5e-5}


@pytest.mark.parametrize("op", UNARY)
def test_unary(gpu, op):
    fn, attrs = UNARY[op]
    x = f32(6, 50)
    if op in DOMAINS:
        x = np.clip(x, -DOMAINS[op], DOMAINS[op])
    if op == "Acosh":
        x = np.abs(x) + 1
    if op == "Round":
        x[0, :6] = [0.5, 1.5, 2.5, -0.5, -2.5, 8388609.0]
    if op == "Tanh":
        x[0, :6] = [1e-4, -3e-3, 0.049, 0.051, 20, -20]  # both sides of the series' edge
    got = run(gpu, op, x, opset=20, **attrs)
    want = fn(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=RTOL.get(op, 1e-5), atol=1e-6)


def test_nan_and_infinity_tests_and_sign(gpu):
    x = np.array([np.nan, np.inf, -np.inf, 0, -0.0, 3.5, -2], np.float32)
    np.testing.assert_array_equal(run(gpu, "IsNaN", x), np.isnan(x))
    np.testing.assert_array_equal(run(gpu, "IsInf", x, opset=10), np.isinf(x))
    np.testing.assert_array_equal(run(gpu, "IsInf", x, opset=10, detect_negative=0), np.isposinf(x))
    np.testing.assert_array_equal(run(gpu, "Sign", x), np.sign(x))
    i = np.array([-7, 0, 4], np.int64)
    np.testing.assert_array_equal(run(gpu, "Sign", i), np.sign(i))


def test_max_min_propagate_nan(gpu):
    a = np.array([np.nan, 1, 2, -np.inf], np.float32)
    b = np.array([0, np.nan, 1, 5], np.float32)
    np.testing.assert_array_equal(run(gpu, "Max", a, b), np.maximum(a, b))
    np.testing.assert_array_equal(run(gpu, "Min", a, b), np.minimum(a, b))


def test_pow_follows_c_for_negative_bases_and_zero_exponents(gpu):
    a = np.array([-2, -2, -8, 0, np.nan, 3, -1.5], np.float32)
    b = np.array([3, 2, 1 / 3, 0, 0, -2, 2], np.float32)
    np.testing.assert_allclose(run(gpu, "Pow", a, b), np.power(a, b), rtol=1e-6)


def test_variadic_sum_mean_and_clip_with_broadcasting(gpu):
    a, b, c = f32(2, 3, 4), f32(4), f32(3, 1)
    np.testing.assert_allclose(run(gpu, "Sum", a, b, c), a + b + c, rtol=1e-6)
    np.testing.assert_allclose(run(gpu, "Mean", a, b, c), (a + b + c) / 3, rtol=1e-6, atol=1e-7)
    low, high = np.float32(-0.5), np.float32(1.0)
    np.testing.assert_array_equal(run(gpu, "Clip", a, low, high), np.clip(a, low, high))
    np.testing.assert_array_equal(run(gpu, "Clip", a, None, high), np.minimum(a, high))
    np.testing.assert_array_equal(run(gpu, "Clip", a, opset=6, min=-0.25, max=0.75), np.clip(a, -0.25, 0.75))
    slope = f32(4)
    np.testing.assert_allclose(run(gpu, "PRelu", a, slope), np.where(a < 0, slope * a, a), rtol=1e-6)


def test_integer_mod_and_bit_shift(gpu):
    x, y = RNG.integers(-50, 50, (3, 7)), RNG.integers(1, 9, (7,)) * RNG.choice([-1, 1], 7)
    np.testing.assert_array_equal(run(gpu, "Mod", x, y), np.mod(x, y))
    np.testing.assert_array_equal(run(gpu, "Mod", x, y, fmod=1), np.fmod(x, y))
    u, s = RNG.integers(0, 256, 9).astype(np.uint8), RNG.integers(0, 8, 9).astype(np.uint8)
    np.testing.assert_array_equal(run(gpu, "BitShift", u, s, direction="RIGHT"), u >> s)
    np.testing.assert_array_equal(run(gpu, "BitShift", u, s, direction="LEFT"), u << s)


REDUCTIONS = {
    "ReduceMax": np.max,
    "ReduceMin": np.min,
    "ReduceProd": np.prod,
    "ReduceL1": lambda x, axis, keepdims: np.sum(np.abs(x), axis=axis, keepdims=keepdims),
    "ReduceL2": lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims)),
    "ReduceSumSquare": lambda x, axis, keepdims: np.sum(x * x, axis=axis, keepdims=keepdims),
    "ReduceLogSum": lambda x, axis, keepdims: np.log(np.sum(x, axis=axis, keepdims=keepdims)),
    "ReduceLogSumExp": lambda x, axis, keepdims: np.log(
        np.sum(np.exp(x.astype(np.float64)), axis=axis, keepdims=keepdims)
    ),
}


@pytest.mark.parametrize("axes", [None, (1,), (1, 2), (0, 2), (-1,)], ids=str)
@pytest.mark.parametrize("op", REDUCTIONS)
def test_reductions(gpu, op, axes):
    x = np.abs(f32(3, 4, 5, scale=1.0)) + 0.5 if op == "ReduceLogSum" else f32(3, 4, 5, scale=1.0)
    keep = axes != (1,)
    given = None if axes is None else np.array(axes, np.int64)
    got = run(gpu, op, x, given, keepdims=int(keep))
    want = REDUCTIONS[op](x, axis=axes, keepdims=keep)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_reductions_of_integers_of_nan_and_of_nothing(gpu):
    i = RNG.integers(-9, 9, (4, 6))
    np.testing.assert_array_equal(run(gpu, "ReduceMax", i, np.array([1])), i.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(
        run(gpu, "ReduceProd", i[:, :3], np.array([0]), keepdims=0), i[:, :3].prod(0)
    )
    x = f32(2, 3)
    x[1, 1] = np.nan
    np.testing.assert_array_equal(run(gpu, "ReduceMax", x, np.array([1])), np.max(x, axis=1, keepdims=True))
    empty = np.zeros((2, 0, 3), np.float32)
    np.testing.assert_array_equal(run(gpu, "ReduceMax", empty, np.array([1])), np.full((2, 1, 3), -np.inf))
    np.testing.assert_array_equal(run(gpu, "ReduceProd", empty, np.array([1]), keepdims=0), np.ones((2, 3)))
    np.testing.assert_array_equal(run(gpu, "ReduceMin", x, None, noop_with_empty_axes=1), x)


@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_arg_max_and_min_with_ties(gpu, axis, last):
    x = RNG.integers(0, 3, (4, 5, 6)).astype(np.float32)  # many ties
    for op, fn in (("ArgMax", np.argmax), ("ArgMin", np.argmin)):
        got = run(gpu, op, x, axis=axis, keepdims=0, select_last_index=last)
        flipped = np.flip(x, axis=axis)
        want = x.shape[axis] - 1 - fn(flipped, axis=axis) if last else fn(x, axis=axis)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
    kept = run(gpu, "ArgMax", x, axis=axis, keepdims=1)
    np.testing.assert_array_equal(kept, np.expand_dims(np.argmax(x, axis=axis), axis))


def test_gather_elements_tile_and_trilu(gpu):
    data = f32(3, 4, 5)
    for axis in (0, 1, 2):
        shape = [*data.shape[:axis], 2, *data.shape[axis + 1 :]]
        idx = RNG.integers(-data.shape[axis], data.shape[axis], shape)
        want = np.take_along_axis(data, np.where(idx < 0, idx + data.shape[axis], idx), axis=axis)
        np.testing.assert_array_equal(run(gpu, "GatherElements", data, idx, axis=axis), want)
    np.testing.assert_array_equal(run(gpu, "Tile", data, np.array([2, 1, 3])), np.tile(data, (2, 1, 3)))
    m = f32(2, 4, 6)
    for k in (-2, 0, 3, 100):
        np.testing.assert_array_equal(run(gpu, "Trilu", m, np.array(k)), np.triu(m, k))
        np.testing.assert_array_equal(run(gpu, "Trilu", m, np.array(k), upper=0), np.tril(m, k))


def test_split_range_constant_of_shape_and_cast_like(gpu):
    x = f32(4, 7)
    parts = run(gpu, "Split", x, np.array([2, 5]), axis=1, outputs=2)
    for got, want in zip(parts, np.split(x, [2], axis=1), strict=True):
        np.testing.assert_array_equal(got, want)
    thirds = run(gpu, "Split", x, axis=1, outputs=3)
    assert [p.shape for p in thirds] == [(4, 3), (4, 3), (4, 1)]
    np.testing.assert_array_equal(
        run(gpu, "Range", np.int64(10), np.int64(-3), np.int64(-4)), np.arange(10, -3, -4)
    )
    np.testing.assert_allclose(
        run(gpu, "Range", np.float32(1), np.float32(2), np.float32(0.25)), np.arange(1, 2, 0.25)
    )
    filled = run(gpu, "ConstantOfShape", np.array([2, 3]), value=np.array([7], np.int32))
    np.testing.assert_array_equal(filled, np.full((2, 3), 7, np.int32))
    np.testing.assert_array_equal(
        run(gpu, "CastLike", x * 10, np.zeros(1, np.int32)), (x * 10).astype(np.int32)
    )


def test_log_softmax_hardmax_cumsum_and_cumprod(gpu):
    x = f32(3, 4, 5)
    for axis in (0, 1, -1):
        shifted = x - x.max(axis=axis, keepdims=True)
        want = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
        np.testing.assert_allclose(run(gpu, "LogSoftmax", x, axis=axis), want, rtol=1e-5, atol=1e-6)
        hard = run(gpu, "Hardmax", x, axis=axis)
        one_hot = np.zeros_like(x)
        np.put_along_axis(one_hot, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
        np.testing.assert_array_equal(hard, one_hot)
    flat = run(gpu, "LogSoftmax", x, opset=11, axis=1)  # before opset 13: the trailing axes together
    rows = x.reshape(3, 20)
    want = rows - rows.max(1, keepdims=True)
    want = want - np.log(np.exp(want).sum(1, keepdims=True))
    np.testing.assert_allclose(flat, want.reshape(x.shape), rtol=1e-5, atol=1e-6)
    for exclusive in (0, 1):
        for reverse in (0, 1):
            got = run(gpu, "CumSum", x, np.array(1), exclusive=exclusive, reverse=reverse)
            source = np.flip(x, 1) if reverse else x
            want = np.cumsum(source, axis=1) - (source if exclusive else 0)
            want = np.flip(want, 1) if reverse else want
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    ints = RNG.integers(-5, 5, (2, 6))
    np.testing.assert_array_equal(run(gpu, "CumSum", ints, np.array(-1)), np.cumsum(ints, axis=-1))
    got = run(gpu, "CumProd", x, np.array(2), opset=26, exclusive=1)
    want = np.concatenate([np.ones((3, 4, 1), np.float32), np.cumprod(x, axis=2)[..., :-1]], axis=2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(run(gpu, "CumProd", ints, np.array(1), opset=26), np.cumprod(ints, axis=1))


def test_signed_bit_shifts_out_of_range_follow_numpy(gpu):
    x = np.array([-8, 8, -1, 5, 7, -3], np.int32)
    s = np.array([1, 31, 32, -1, 40, 2], np.int32)
    np.testing.assert_array_equal(run(gpu, "BitShift", x, s, direction="LEFT"), np.left_shift(x, s))
    np.testing.assert_array_equal(run(gpu, "BitShift", x, s, direction="RIGHT"), np.right_shift(x, s))


def test_gather_nd_with_batch_dims(gpu):
    data = f32(2, 3, 4, 5)
    indices = np.stack([RNG.integers(-3, 3, (2, 6)), RNG.integers(0, 4, (2, 6))], axis=-1)
    got = run(gpu, "GatherND", data, indices, opset=13, batch_dims=1)
    want = np.stack([data[b][tuple(np.moveaxis(indices[b], -1, 0))] for b in range(2)])
    np.testing.assert_array_equal(got, want)
    plain = RNG.integers(0, 2, (4, 1))
    np.testing.assert_array_equal(run(gpu, "GatherND", data, plain, opset=13), data[plain[:, 0]])


def test_gemm_transposes_scales_and_broadcasts_c(gpu):
    a, b, c = f32(7, 5), f32(6, 7), f32(6)
    got = run(gpu, "Gemm", a, b, c, opset=13, transA=1, transB=1, alpha=0.5, beta=-2.0)
    np.testing.assert_allclose(got, 0.5 * a.T @ b.T - 2 * c, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run(gpu, "Gemm", a.T, b.T, opset=13), a.T @ b.T, rtol=1e-5, atol=1e-5)


def numpy_scatter(out, positions, values, reduction):
    """Apply ``values`` at ``positions`` (index tuples) of ``out`` one after another."""
    apply = {
        "none": lambda old, new: new,
        "add": np.add,
        "mul": np.multiply,
        "max": np.maximum,
        "min": np.minimum,
    }[reduction]
    for position, value in zip(positions, values, strict=True):
        out[position] = apply(out[position], value)
    return out


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_and_elements_with_repeated_indices(gpu, reduction):
    data = f32(4, 3, 5)
    indices = np.array([[1, 2], [3, 0], [1, 2], [-1, 1]])  # [1, 2] twice: reduced in order
    updates = f32(4, 5)
    got = run(gpu, "ScatterND", data, indices, updates, reduction=reduction)
    positions = [tuple(i % s for i, s in zip(index, data.shape, strict=False)) for index in indices]
    want = numpy_scatter(data.copy(), positions, updates, reduction)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    along = RNG.integers(-3, 3, (4, 2, 5))  # repeats along axis 1
    values = f32(4, 2, 5)
    got = run(gpu, "ScatterElements", data, along, values, axis=1, reduction=reduction)
    places = [(a, int(along[a, b, c]) % 3, c) for a, b, c in np.ndindex(along.shape)]
    want = numpy_scatter(data.copy(), places, values.reshape(-1), reduction)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_softmax_cross_entropy_and_nll_with_weights_and_ignored_labels(gpu, reduction):
    scores, labels, weight = f32(3, 5, 4), RNG.integers(0, 5, (3, 4)), np.abs(f32(5)) + 0.1
    labels[0, 1] = labels[2, 3] = -1
    shifted = scores - scores.max(axis=1, keepdims=True)
    log_prob = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    kept = labels != -1
    classes = np.where(kept, labels, 0)
    picked = np.take_along_axis(log_prob, classes[:, None], axis=1)[:, 0]
    w = np.where(kept, weight[classes], 0)
    terms = -picked * w
    want = {"none": terms, "sum": terms.sum(), "mean": terms.sum() / w.sum()}[reduction]
    attrs = {"reduction": reduction, "ignore_index": -1}
    loss, got_log_prob = run(gpu, "SoftmaxCrossEntropyLoss", scores, labels, weight, outputs=2, **attrs)
    np.testing.assert_allclose(got_log_prob, log_prob, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-6)
    nll = run(gpu, "NegativeLogLikelihoodLoss", log_prob, labels, weight, **attrs)
    np.testing.assert_allclose(nll, want, rtol=1e-5, atol=1e-6)
