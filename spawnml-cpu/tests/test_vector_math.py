"""The CPU's vectorized float32 exp, sigmoid, tanh, erf and GELU against float64 references, in
float32 ULPs of the exact result (the bounds :mod:`spawnml_cpu.kernels.vector_math` states):
on random bit patterns over the whole float32 range, dense grids where the functions bend, and
the special values (NaN, ±inf, ±0, subnormals, overflow). And elementwise passes give the same
bits however they are cut over threads."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from spawnml.kernel.library.chain import encode, step
from spawnml.threads import intra_op
from spawnml_cpu.kernels import elementwise
from spawnml_cpu.kernels.elementwise import erf_ufunc, map_float32
from spawnml_cpu.kernels.fused import compiled, fused_elementwise
from spawnml_cpu.kernels.threads import run_spans

FLT_MAX = float(np.finfo(np.float32).max)
RNG = np.random.default_rng(5)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x < 0, e, 1.0) / (1.0 + e)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + erf_ufunc()(x / math.sqrt(2)))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


#: Each function's float64 reference and its bound in ULPs.
REFERENCES = {
    "exp": (np.exp, 1.0),
    "sigmoid": (_sigmoid, 2.5),
    "tanh": (np.tanh, 2.0),
}


def _inputs() -> np.ndarray:
    """Random bit patterns (every exponent alike), dense grids near 0, and the special values."""
    patterns = RNG.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    grid = np.linspace(-110, 110, 400_001, dtype=np.float32)
    small = np.geomspace(1e-45, 1.0, 20_001, dtype=np.float32)
    special = np.array([0.0, np.inf, 88.72283, 88.72284, 88.7229, -87.33655, -103.27893, -103.97208, 1e-38])
    values = np.concatenate([patterns, grid, small, special.astype(np.float32)])
    return np.concatenate([values, -values])


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """``got``'s distance from the float64 ``want`` in float32 ULPs of ``want`` (subnormal ones
    below the normal range), where ``want`` is a finite float32 magnitude; 0 elsewhere."""
    inside = np.isfinite(want) & (np.abs(want) <= FLT_MAX)
    exponent = np.frexp(np.where(inside, np.abs(want), 1.0))[1]
    ulp = np.ldexp(1.0, np.maximum(exponent - 1, -126) - 23)
    with np.errstate(all="ignore"):
        return np.where(inside, np.abs(got.astype(np.float64) - np.where(inside, want, 0)) / ulp, 0.0)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_within_its_ulp_bound(name):
    reference, bound = REFERENCES[name]
    x = _inputs()
    got = map_float32(name, x)
    assert got.dtype == np.float32 and got.shape == x.shape
    with np.errstate(all="ignore"):
        want = reference(x.astype(np.float64))
    assert ulps(got, want).max() <= bound
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    beyond = ~nan & (np.abs(want) > FLT_MAX)  # overflow: ±inf
    np.testing.assert_array_equal(got[beyond], np.copysign(np.inf, want[beyond]))


def test_erf_within_5e_7_absolute_and_4_ulp_below_1():
    x = _inputs()
    got = map_float32("erf", x)
    with np.errstate(all="ignore"):
        want = erf_ufunc()(x.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    assert np.abs(got[finite] - want[finite]).max() <= 5e-7
    below = np.abs(x) < 1
    assert ulps(got[below], want[below]).max() <= 4.01


@pytest.mark.parametrize(("name", "reference"), [("gelu", _gelu), ("gelu_tanh", _gelu_tanh)])
def test_gelu_within_5e_7_relative_to_its_size(name, reference):
    """GELU inherits erf's (tanh's) absolute error, scaled by ``|x| / 2``."""
    x = np.concatenate([np.linspace(-20, 20, 400_001), [0.0, 1e-40, 3e38, -3e38]]).astype(np.float32)
    got = map_float32(name, x)
    with np.errstate(all="ignore"):
        want = reference(x.astype(np.float64))
    finite = np.abs(want) < FLT_MAX
    scale = np.maximum(np.abs(x[finite]).astype(np.float64), 1.0)
    assert (np.abs(got[finite] - want[finite]) / scale).max() <= 5e-7


def test_special_values_as_numpy_has_them():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 100.0, -200.0], dtype=np.float32)
    results = {name: map_float32(name, x) for name in ("exp", "sigmoid", "tanh", "erf", "gelu")}
    with np.errstate(all="ignore"):
        for name, want in (("exp", np.exp(x)), ("tanh", np.tanh(x))):
            np.testing.assert_array_equal(results[name], want)
            np.testing.assert_array_equal(np.signbit(results[name]), np.signbit(want))
    np.testing.assert_array_equal(results["sigmoid"], [np.nan, 1, 0, 0.5, 0.5, 0.5, 0.5, 1, 0])
    np.testing.assert_array_equal(results["erf"][:5], [np.nan, 1, -1, 0, -0.0])
    assert np.signbit(results["erf"][4]) and np.signbit(results["erf"][6])
    assert results["erf"][5] == np.float32(2 / math.sqrt(math.pi) * 1e-45)
    np.testing.assert_array_equal(results["gelu"][:5], [np.nan, np.inf, np.nan, 0, -0.0])
    assert np.signbit(results["gelu"][4])


CHAINS = {
    "silu": encode((step("Sigmoid", [0], "float32"), step("Mul", [0, 1], "float32"))),
    "gelu": encode((step("Gelu", [0], "float32", {"approximate": "none"}), step("Add", [1, 2], "float32"))),
    "tanh-gelu": encode((step("Gelu", [0], "float32", {"approximate": "tanh"}),)),
}


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_fused_chain_gives_the_same_bits_however_it_is_cut(chain):
    """The vector loop and its scalar remainder compute each element alike, so spans that end
    anywhere give the same bits as one pass; so do one and two threads."""
    size = 3 * elementwise.MIN_SPLIT_ELEMENTS + 7
    x = (RNG.standard_normal(size) * 8).astype(np.float32)
    x[::97] = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-42, 95.0], np.float32)[np.arange(x[::97].size) % 6]
    scalar = np.array([0.25], np.float32)
    inputs = [x] if chain != "gelu" else [x, scalar]
    kernel = compiled(CHAINS[chain], tuple(a.size == 1 for a in inputs))
    whole = np.empty(size, np.float32)
    kernel(whole, *inputs)
    cut = np.empty(size, np.float32)
    run_spans(lambda s: kernel(cut[s], *(a if a.size == 1 else a[s] for a in inputs)), size, 13, 2)
    np.testing.assert_array_equal(cut, whole)
    context = SimpleNamespace(attrs={"chain": CHAINS[chain]})
    for threads in (1, 2):
        with intra_op(threads):
            np.testing.assert_array_equal(fused_elementwise(context, *inputs), whole)


@pytest.mark.parametrize("name", ["exp", "sigmoid", "tanh", "erf", "gelu"])
def test_map_gives_the_same_bits_on_one_and_two_threads(name):
    x = (RNG.standard_normal(2 * elementwise.MIN_SPLIT_ELEMENTS + 3) * 5).astype(np.float32)
    results = []
    for threads in (1, 2):
        with intra_op(threads):
            results.append(map_float32(name, x))
    np.testing.assert_array_equal(results[0], results[1])
    small = x[:1001]
    np.testing.assert_array_equal(map_float32(name, small), results[0][:1001])


def test_numpy_passes_cut_over_threads_keep_shape_and_values():
    x = RNG.standard_normal((3, elementwise.MIN_SPLIT_ELEMENTS)).astype(np.float64)
    with intra_op(2):
        np.testing.assert_array_equal(elementwise._split(np.exp)(x.T), np.exp(x.T))
        np.testing.assert_array_equal(elementwise._split(np.tanh)(x), np.tanh(x))
