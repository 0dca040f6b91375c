"""The kit's comparison rules, and their agreement with onnx's own backend test runner."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx.backend.test.runner import Runner
from spawnml.conformance.compare import compare_outputs, compare_runs

RTOL, ATOL = 1e-3, 1e-7
F32 = np.float32


def arr(values, dtype=F32) -> np.ndarray:
    return np.array(values, dtype=dtype)


#: (expected, got, whether they match) for one output, in cases onnx's runner decides too.
PAIRS = [
    pytest.param(arr([1.0, 2.0]), arr([1.0, 2.0]), True, id="equal"),
    pytest.param(arr([1000.0]), arr([1000.999]), True, id="within-rtol"),
    pytest.param(arr([1000.0]), arr([1001.5]), False, id="beyond-rtol"),
    pytest.param(arr([0.0]), arr([5e-8]), True, id="within-atol"),
    pytest.param(arr([0.0]), arr([1e-6]), False, id="beyond-atol"),
    pytest.param(arr([np.nan, 1.0]), arr([np.nan, 1.0]), True, id="nan-matches-nan"),
    pytest.param(arr([np.nan]), arr([1.0]), False, id="nan-vs-number"),
    pytest.param(arr([np.inf, -np.inf]), arr([np.inf, -np.inf]), True, id="infinities"),
    pytest.param(arr([np.inf]), arr([-np.inf]), False, id="inf-sign"),
    pytest.param(arr([1, 2], np.int64), arr([1, 2], np.int32), False, id="dtype"),
    pytest.param(arr([[1.0, 2.0]]), arr([1.0, 2.0]), False, id="shape"),
    pytest.param(arr([], F32), arr([], F32), True, id="empty"),
    pytest.param(arr(["a", "b"], object), arr(["a", "b"], object), True, id="strings"),
    pytest.param(arr(["a", "b"], object), arr(["a", "c"], object), False, id="strings-differ"),
    pytest.param(
        arr([1.0], ml_dtypes.bfloat16), arr([1.0078125], ml_dtypes.bfloat16), True, id="bf16-one-ulp"
    ),
    pytest.param(
        arr([1.0], ml_dtypes.bfloat16), arr([1.03125], ml_dtypes.bfloat16), False, id="bf16-four-ulps"
    ),
    pytest.param([arr([1.0]), arr([2.0, 3.0])], [arr([1.0]), arr([2.0, 3.0])], True, id="sequence"),
    pytest.param([arr([1.0]), arr([2.0])], [arr([1.0]), arr([2.5])], False, id="sequence-item"),
]


def onnx_runner_accepts(want, got) -> bool:
    try:
        Runner.assert_similar_outputs([want], [got], RTOL, ATOL)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize(("want", "got", "match"), PAIRS)
def test_comparison_agrees_with_onnx_runner(want, got, match):
    assert onnx_runner_accepts(want, got) is match
    assert (compare_outputs([want], [got], RTOL, ATOL) is None) is match


@pytest.mark.parametrize(
    ("want", "got", "message"),
    [
        (arr([1.0]), arr([1.0], np.float64), "output 0 has dtype float64, expected float32"),
        (arr([[1.0]]), arr([1.0]), "output 0 has shape [1], expected [1, 1]"),
        ([arr([1.0])], arr([1.0]), "output 0 is a ndarray, expected a sequence"),
        ([arr([1.0]), arr([2.0])], [arr([1.0])], "output 0 is a sequence of 1, expected 2"),
        ([arr([1.0]), arr([2.0])], [arr([1.0]), arr([2.0], np.int64)], "output 0[1] has dtype int64"),
        (None, arr([1.0]), "output 0 is a ndarray, expected an absent optional value"),
        (arr([1.0]), None, "output 0 is absent (None), expected a float32 array"),
        (arr([1.0]), [1.0], "output 0 is a list, expected a float32 array"),
    ],
)
def test_mismatches_say_where_and_what(want, got, message):
    assert message in compare_outputs([want], [got], RTOL, ATOL)


def test_stricter_than_onnx_on_sequence_length_and_absent_optionals():
    assert compare_outputs([[arr([1.0]), arr([2.0])]], [[arr([1.0])]], RTOL, ATOL) is not None
    assert compare_outputs([None], [None], RTOL, ATOL) is None


def test_output_count_and_runs():
    assert compare_outputs([arr([1.0])], [], RTOL, ATOL) == "0 outputs, expected 1"
    assert compare_runs([[arr([1.0])]], [], RTOL, ATOL) == "0 runs, expected 1"
    runs = [[arr([1.0])], [arr([2.0])]]
    assert compare_runs(runs, runs, RTOL, ATOL) is None
    problem = compare_runs(runs, [[arr([1.0])], [arr([3.0])]], RTOL, ATOL)
    assert problem.startswith("data set 1: ") and "output 0" in problem


def test_numpy_scalars_compare_as_zero_dim_arrays():
    assert compare_outputs([F32(2.0)], [arr(2.0)], RTOL, ATOL) is None


@pytest.mark.parametrize(
    ("want", "got"),
    [
        # 2**40 and 2**40 + 1: within any relative tolerance, as onnx's runner would accept.
        pytest.param(arr([2**40], np.int64), arr([2**40 + 1], np.int64), id="int64-low-bit"),
        # A BitCast wrong in its low 19 bits: 2.5e-4 apart relatively, inside rtol 1e-3.
        pytest.param(arr([0x7F000000], np.uint32), arr([0x7F07FFFF], np.uint32), id="uint32-low-bits"),
        pytest.param(arr([120], np.int8), arr([121], np.int8), id="int8"),
        pytest.param(arr([-3], ml_dtypes.int4), arr([-2], ml_dtypes.int4), id="int4"),
        pytest.param(arr([True, False]), arr([True, True]), id="bool"),
    ],
)
def test_integers_and_booleans_compare_exactly(want, got):
    assert compare_outputs([want], [got], RTOL, ATOL) is not None
    assert compare_outputs([want], [want.copy()], RTOL, ATOL) is None
