"""float64 on the GPU backends: the math functions in double precision against numpy.

WGSL has float64 (wgpu's ``shader-f64``) but Vulkan gives it no transcendentals, so the WGSL
renderer brings its own (``spawnml.kernel.render.wgsl_f64``); OpenCL C and CUDA C have them.
Tolerance: ``rtol=1e-13`` (numpy's are correctly rounded to about 1 ulp, ours to a few ulp), except
that sin, cos and tan reduce their argument exactly only below ``2**20 * pi / 2`` and are checked
there, and subnormal arguments are left out (devices may flush them to zero). Skips with the reason
where a backend has no device or the device no double precision.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from spawnml.backend import KernelContext
from spawnml.ir import Node

from tests.backends import GPU_BACKENDS, backend_or_skip

RTOL = 1e-13
#: Results below float64's normal range are compared absolutely (devices may flush them to zero).
ATOL = 2.3e-308
SPECIALS = [0.0, -0.0, 1e-300, -1e-300, 1e300, -1e300, 709.5, 710.0, -745.0, -746.0, 30.0, -30.0]
NON_FINITE = [np.inf, -np.inf, np.nan]


def _values(*ranges: tuple[float, float], specials: bool = True) -> np.ndarray:
    rng = np.random.default_rng(64)
    parts = [rng.uniform(low, high, 400) for low, high in ranges]
    return np.concatenate([*parts, *([SPECIALS] if specials else []), NON_FINITE])


def _erf(v: np.ndarray) -> np.ndarray:
    return np.array([math.erf(t) for t in v])


WIDE = _values((-40, 40), (-3, 3), (-1e-3, 1e-3))
TRIG = _values((-1e5, 1e5), (-7, 7), (-1e-3, 1e-3), specials=False)
UNIT = _values((-1, 1), (-1e-6, 1e-6), specials=False)
POSITIVE = np.abs(WIDE)
#: Each operator: its reference and its arguments.
FUNCTIONS = {
    "Exp": (np.exp, WIDE),
    "Log": (np.log, POSITIVE),
    "Sqrt": (np.sqrt, POSITIVE),
    "Sin": (np.sin, TRIG),
    "Cos": (np.cos, TRIG),
    "Tan": (np.tan, TRIG),
    "Tanh": (np.tanh, WIDE),
    "Sigmoid": (lambda v: np.where(v >= 0, 1 / (1 + np.exp(-v)), np.exp(v) / (1 + np.exp(v))), WIDE),
    "Erf": (_erf, WIDE),
    "Softplus": (lambda v: np.logaddexp(0, v), WIDE),
    "Sinh": (np.sinh, WIDE),
    "Cosh": (np.cosh, WIDE),
    "Asinh": (np.arcsinh, WIDE),
    "Acosh": (np.arccosh, 1 + POSITIVE),
    "Atanh": (np.arctanh, UNIT),
    "Atan": (np.arctan, WIDE),
    "Asin": (np.arcsin, UNIT),
    "Acos": (np.arccos, UNIT),
}


@pytest.fixture(scope="module", params=GPU_BACKENDS)
def gpu(request):
    backend = backend_or_skip(request.param)
    if not backend.runtime.float64:
        pytest.skip(f"{backend.device_name()} has no double precision")
    return backend


@pytest.mark.parametrize("op", sorted(FUNCTIONS))
def test_function_in_double_precision(gpu, op):
    reference, x = FUNCTIONS[op]
    spec = gpu.kernels.find("", op, 18)
    ctx = KernelContext(Node(op, [], ["y"]), 18, {}, gpu)
    got = gpu.to_numpy(spec.fn(ctx, gpu.from_numpy(x)))
    with np.errstate(all="ignore"):
        want = reference(x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{op} on {gpu.name}")


def test_pow_in_double_precision(gpu):
    rng = np.random.default_rng(2)
    base = np.concatenate([rng.uniform(0, 50, 300), rng.uniform(-5, 5, 100), [0.0, 0.0, 2.0, -2.0]])
    exponent = np.concatenate([rng.uniform(-8, 8, 300), rng.integers(-6, 7, 100), [2.0, -1.0, 0.5, 3.0]])
    spec = gpu.kernels.find("", "Pow", 15)
    ctx = KernelContext(Node("Pow", [], ["z"]), 15, {}, gpu)
    got = gpu.to_numpy(spec.fn(ctx, gpu.from_numpy(base), gpu.from_numpy(exponent)))
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got, np.power(base, exponent), rtol=RTOL, atol=ATOL)


def test_without_double_precision_float64_is_refused_at_load(gpu, monkeypatch):
    monkeypatch.setattr(gpu.runtime, "float64", False)
    reason = gpu.unsupported_reason(
        Node("Exp", ["x"], ["y"]), 18, [np.dtype(np.float64)], [np.dtype(np.float64)]
    )
    assert reason == f"{gpu.name} holds no double tensors: {gpu.runtime.describe()} has no double precision"
