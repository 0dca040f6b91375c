"""The CPU error function (Erf, Gelu) against Python's ``math.erf``: float32 within 5e-7 absolute
(a rational approximation), float64 exact; NaN and infinities as IEEE has them."""

from __future__ import annotations

import math

import numpy as np
from spawnml_cpu.kernels.elementwise import erf_ufunc


def _reference(x: np.ndarray) -> np.ndarray:
    return np.array([math.erf(float(value)) for value in x.ravel()]).reshape(x.shape)


def test_float32_erf_is_within_5e_7_of_math_erf():
    x = np.concatenate([np.linspace(-7, 7, 200_001), np.geomspace(1e-30, 1e-2, 1000)]).astype(np.float32)
    y = erf_ufunc()(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, _reference(x), rtol=0, atol=5e-7)
    small = x[(x > 0) & (x < 1e-2)]  # near zero the error is relative
    np.testing.assert_allclose(erf_ufunc()(small), _reference(small), rtol=1e-6)


def test_float64_erf_is_math_erf():
    x = np.linspace(-7, 7, 20_001)
    np.testing.assert_array_equal(erf_ufunc()(x), _reference(x))


def test_erf_of_special_values():
    for dtype in (np.float32, np.float64):
        x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=dtype)
        with np.errstate(invalid="ignore"):
            y = erf_ufunc()(x)
        assert np.isnan(y[0])
        np.testing.assert_array_equal(y[1:], [1.0, -1.0, 0.0, -0.0])
        assert np.signbit(y[4])
