"""Reducing operators against onnxruntime: Reduce*, ArgMax/ArgMin, CumSum and the softmaxes.

Tolerances: float16 allows two units in the last place, since sums round differently
depending on the order of accumulation; float32 and float64 allow a few ulps for the same
reason. Integer results must be equal.
"""

from __future__ import annotations

import numpy as np
import pytest
import spawnml

from tests.ops.conftest import make_model

F16, F32, F64, I32, I64 = np.float16, np.float32, np.float64, np.int32, np.int64
FLOATS = (F32, F16, F64)
NUMBERS = (*FLOATS, I32, I64)
TOLERANCE = {F16: (2e-3, 1e-3), F32: (1e-5, 1e-6), F64: (1e-12, 1e-12)}

#: The opset from which each reduction takes its axes as an input.
AXES_INPUT_SINCE = {"ReduceSum": 13} | dict.fromkeys(
    [
        "ReduceMean",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceSumSquare",
    ],
    18,
)
#: Reductions that accept negative inputs (the rest are given positive values).
SIGNED = {
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceSumSquare",
    "ReduceLogSumExp",
}


def tolerance(dtype) -> dict[str, float]:
    rtol, atol = TOLERANCE.get(np.dtype(dtype).type, (0, 0))
    return {"rtol": rtol, "atol": atol}


def values(dtype, shape=(2, 3, 4), positive=False, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(1 if positive else -5, 6, size=shape).astype(dtype)
    return rng.uniform(0.1 if positive else -2.0, 2.0, size=shape).astype(dtype)


AXES = [None, [1], [0, 2], [-1], [2, 0, 1], []]


def reduce_model(op, x, axes, keepdims, opset, noop=None, constant_axes=True):
    """A reduction with ``axes`` as attribute (older opsets) or input (constant or fed)."""
    attrs = {"keepdims": keepdims} | ({} if noop is None else {"noop_with_empty_axes": noop})
    if opset < AXES_INPUT_SINCE[op]:
        return make_model(op, {"x": x}, opset=opset, **attrs, **({} if axes is None else {"axes": axes})), {
            "x": x
        }
    if axes is None:
        return make_model(op, {"x": x}, opset=opset, **attrs), {"x": x}
    axes_array = np.array(axes, dtype=np.int64)
    if constant_axes:
        return make_model(op, {"x": x}, opset=opset, initializers={"axes": axes_array}, **attrs), {"x": x}
    feeds = {"x": x, "axes": axes_array}
    return make_model(op, feeds, opset=opset, **attrs), feeds


def _reduction_cases():
    """Each reduction at the opsets before and from axes as an input, on each type and axes.
    Left out: an empty axes attribute (it reduces every axis, as the axes=None case does), and
    ReduceLogSumExp on integers, which onnxruntime truncates before adding the max (see below)."""
    for op, since in AXES_INPUT_SINCE.items():
        for opset in (since - 1 if op == "ReduceSum" else 13, since):
            for dtype in NUMBERS:
                if op == "ReduceLogSumExp" and np.issubdtype(dtype, np.integer):
                    continue
                for axes in AXES:
                    if axes != [] or opset >= since:
                        name = f"{op}-v{opset}-{np.dtype(dtype).name}-{axes}"
                        yield pytest.param(op, opset, dtype, axes, id=name)


@pytest.mark.parametrize("keepdims", [1, 0])
@pytest.mark.parametrize(("op", "opset", "dtype", "axes"), list(_reduction_cases()))
def test_reduce(check, op, opset, dtype, axes, keepdims):
    x = values(dtype, positive=op not in SIGNED)
    model, feeds = reduce_model(op, x, axes, keepdims, opset)
    check(model, feeds, **tolerance(dtype))


@pytest.mark.parametrize("keepdims", [1, 0])
@pytest.mark.parametrize("op", list(AXES_INPUT_SINCE))
def test_reduce_fed_axes(check, op, keepdims):
    """Axes known only at run time: shape inference knows at most the rank."""
    x = values(F32, positive=op not in SIGNED)
    model, feeds = reduce_model(op, x, [0, -1], keepdims, AXES_INPUT_SINCE[op], constant_axes=False)
    check(model, feeds, **tolerance(F32))


@pytest.mark.parametrize("axes", [None, []], ids=["omitted", "empty"])
@pytest.mark.parametrize("op", list(AXES_INPUT_SINCE))
def test_reduce_noop_with_empty_axes(check, op, axes):
    """With noop_with_empty_axes=1 and no axes the input is not reduced (the elementwise part,
    as in ReduceL2's |x| or ReduceLogSum's log x, still applies)."""
    x = values(F32, positive=op not in SIGNED)
    model, feeds = reduce_model(op, x, axes, 1, AXES_INPUT_SINCE[op], noop=1)
    check(model, feeds, **tolerance(F32))


@pytest.mark.parametrize("keepdims", [1, 0])
@pytest.mark.parametrize(
    "op",
    [
        "ReduceSum",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL1",
        "ReduceL2",
        "ReduceSumSquare",
        "ReduceLogSum",
        "ReduceLogSumExp",
    ],
)
def test_reduce_empty(check, op, keepdims):
    """Reducing an empty axis gives the operation's identity (ReduceMean's is undefined)."""
    for dtype in (F32, I32) if op not in ("ReduceLogSum", "ReduceLogSumExp") else (F32,):
        x = np.zeros((0, 3), dtype=dtype)
        model, feeds = reduce_model(op, x, [0], keepdims, 18)
        check(model, feeds, **tolerance(dtype))


@pytest.mark.parametrize(
    "op",
    ["ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"],
)
def test_reduce_special_values(check, op):
    """NaN and ±inf propagate. (onnxruntime's ReduceMax/Min drop NaN depending on position.)"""
    x = np.array([[1.0, np.nan, 2.0], [np.inf, 1.0, 2.0], [-np.inf, 0.0, -1.0], [np.inf, -np.inf, 1.0]], F32)
    model, feeds = reduce_model(op, x, [1], 1, 18)
    check(model, feeds, **tolerance(F32))


def test_reduce_log_sum_exp_is_stable(check):
    x = np.array([[1000.0, 1000.0], [-1000.0, -1000.0], [-np.inf, -np.inf], [88.0, -3.0]], F32)
    model, feeds = reduce_model("ReduceLogSumExp", x, [1], 0, 18)
    check(model, feeds, **tolerance(F32))


@pytest.mark.parametrize("dtype", [I32, I64])
def test_reduce_log_sum_exp_integers(dtype):
    """Integer results are the exact value truncated toward zero, as for ReduceL2 and ReduceMean."""
    x = values(dtype, (3, 4))
    model, feeds = reduce_model("ReduceLogSumExp", x, [1], 0, 18)
    (got,) = spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
    want = np.trunc(np.log(np.sum(np.exp(x.astype(F64)), axis=1))).astype(dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8])
@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_max_min_small_types(check, op, dtype):
    x = np.random.default_rng(0).integers(0, 2 if dtype == np.bool_ else 100, size=(3, 4)).astype(dtype)
    model, feeds = reduce_model(op, x, [1], 0, 20)
    check(model, feeds)


# ArgMax / ArgMin ---------------------------------------------------------------------------


@pytest.mark.parametrize("select_last_index", [0, 1])
@pytest.mark.parametrize("keepdims", [1, 0])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [*NUMBERS, np.int8, np.uint8])
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg(check, op, dtype, axis, keepdims, select_last_index):
    """Small integer-valued data, so that ties are common."""
    x = np.random.default_rng(0).integers(0, 4, size=(3, 5)).astype(dtype)
    check(
        make_model(op, {"x": x}, opset=13, axis=axis, keepdims=keepdims, select_last_index=select_last_index),
        {"x": x},
    )


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_opset11_defaults(check, op):
    x = values(F32, (3, 4, 2))
    check(make_model(op, {"x": x}, opset=11), {"x": x})


# CumSum ------------------------------------------------------------------------------------


@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", NUMBERS)
def test_cumsum(check, dtype, axis, exclusive, reverse):
    x = values(dtype, (3, 4))
    feeds = {"x": x, "axis": np.array(axis, dtype=I32)}
    check(
        make_model("CumSum", feeds, opset=14, exclusive=exclusive, reverse=reverse), feeds, **tolerance(dtype)
    )


def test_cumsum_constant_axis(check):
    x = values(F32, (2, 3, 4))
    model = make_model("CumSum", {"x": x}, opset=11, initializers={"axis": np.array([1], dtype=I64)})
    check(model, {"x": x}, **tolerance(F32))


# Softmax, LogSoftmax, Hardmax --------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_softmax(check, op, dtype, opset, axis):
    """Before opset 13 the input is flattened to 2-D around ``axis`` (default 1); from 13 the
    operation runs along ``axis`` alone (default -1)."""
    if op == "Hardmax" and dtype == F64:
        pytest.skip("onnxruntime has no float64 Hardmax")
    x = values(dtype, (2, 3, 4)) * 4
    attrs = {} if axis is None else {"axis": axis}
    check(make_model(op, {"x": x}, opset=opset, **attrs), {"x": x}, **tolerance(dtype))


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_large_values(check, op):
    x = np.array([[1000.0, 999.0, -1000.0], [-1e4, -1e4, -1e4], [np.inf, 0.0, 1.0]], F32)
    check(make_model(op, {"x": x}, opset=13), {"x": x}, **tolerance(F32))


def test_hardmax_ties_pick_first(check):
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], F32)
    check(make_model("Hardmax", {"x": x}, opset=13), {"x": x})


# Shape inference -----------------------------------------------------------------------


def inferred(model) -> spawnml.ops.TensorType:
    graph = spawnml.load(model.SerializeToString())
    return spawnml.passes.infer_shapes(graph)[model.graph.output[0].name]


def symbolic(model, *dims):
    """``model`` with its first input's dimensions renamed to symbols where given."""
    for dim, name in zip(model.graph.input[0].type.tensor_type.shape.dim, dims, strict=False):
        if name:
            dim.dim_param = name
    return model


@pytest.mark.parametrize(
    ("axes", "keepdims", "shape"),
    [([1], 1, ("n", 1, 4)), ([1], 0, ("n", 4)), ([0, -1], 0, (3,)), (None, 0, ()), (None, 1, (1, 1, 1))],
)
def test_reduce_symbolic_shapes(axes, keepdims, shape):
    model, _ = reduce_model("ReduceSum", values(F32), axes, keepdims, 13)
    assert inferred(symbolic(model, "n", None, None)).shape == shape


def test_reduce_fed_axes_keep_rank():
    model, _ = reduce_model("ReduceMax", values(F32), [1], 1, 18, constant_axes=False)
    assert inferred(model).shape == (None, None, None)
    model, _ = reduce_model("ReduceMax", values(F32), [1], 0, 18, constant_axes=False)
    assert inferred(model).shape is None


def test_argmax_symbolic_shape():
    model = symbolic(make_model("ArgMax", {"x": values(F32)}, opset=13, axis=2, keepdims=0), "n", "m")
    assert inferred(model) == (np.dtype(np.int64), ("n", "m"))
