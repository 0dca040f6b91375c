"""Max and Min over a short innermost axis (elementwise passes over its slices) give numpy's
reduction exactly: NaN, signed zeros, integers, booleans, keepdims and an axis of one."""

from __future__ import annotations

import numpy as np
import pytest
from spawnml_cpu.kernels.reduce import _REDUCTIONS

rng = np.random.default_rng(0)


def values(dtype: np.dtype, length: int) -> np.ndarray:
    x = rng.standard_normal((4, 5, length)) * 3
    if np.dtype(dtype).kind == "f":
        x = x.astype(dtype)
        x[0, 0, 0] = np.nan
        x[1, 1, :] = -0.0
        x[1, 2, :] = 0.0
        x[1, 2, 0] = -0.0
        return x
    return (x > 0) if np.dtype(dtype).kind == "b" else x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8, np.bool_])
@pytest.mark.parametrize("length", [1, 3, 16])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize(("name", "reference"), [("ReduceMax", np.maximum), ("ReduceMin", np.minimum)])
def test_short_innermost_axis_equals_numpys_reduction(dtype, length, keepdims, name, reference):
    x = values(dtype, length)
    got = _REDUCTIONS[name](x, (2,), keepdims)
    expected = reference.reduce(x, axis=2, keepdims=keepdims)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(got, expected, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(expected))
    assert not np.shares_memory(got, x)
