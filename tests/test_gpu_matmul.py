"""The register-blocked product kernels on every GPU backend, each blocking on every device, against
numpy's float64 product.

Both blockings run on each device whichever the table picks there (:data:`TILED` through workgroup
memory, :data:`DIRECT` straight from device memory, and ``DIRECT`` fitted to the output), over shapes
that end inside a block, a workgroup's tile and a K slice, batches with either operand broadcast,
an empty K and one-row and one-column products. float32 results are within 1e-5 relative and
1e-5 * sqrt(K) absolute of the float64 product of the same float32 inputs (standard normal values,
float32 sums of up to 300 terms in another order), float64 results within 1e-12 of numpy's (on
devices that compute in float64: lavapipe, PoCL, CUDA); int32 results are exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from spawnml.backend import KernelContext
from spawnml.ir import Node
from spawnml.kernel.ir import f32, f64, i32
from spawnml.kernel.library.batched_matmul import DIRECT, TILED, Blocking, batched_matmul

from tests.backends import GPU_BACKENDS, backend_or_skip

rng = np.random.default_rng(31)

#: (batch of a, batch of b, M, K, N); a batch of 1 against a larger one is broadcast (step 0).
SHAPES = [
    (1, 1, 1, 1, 1),
    (1, 1, 1, 300, 70),  # one row
    (1, 1, 70, 300, 1),  # one column
    (1, 1, 129, 17, 65),  # past a 128-row and a 64-column tile
    (3, 3, 37, 45, 20),  # K not a multiple of the slice
    (1, 4, 20, 33, 130),  # a broadcast over the batch
    (2, 1, 64, 16, 64),  # b broadcast; exactly one tile of TILED
    (2, 2, 5, 0, 7),  # empty K: zeros
]


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def gpu(request):
    return backend_or_skip(request.param)


def product(gpu, blocking: Blocking, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of ``[batch, M, K]`` and ``[batch, K, N]`` arrays by the kernel for ``blocking``."""
    (count_a, m, k), (count_b, _, n) = a.shape, b.shape
    count = max(count_a, count_b)
    out = gpu.empty((count, m, n), a.dtype)
    elem = {np.float32: f32, np.float64: f64, np.int32: i32}[a.dtype.type]
    steps = {"a_step": m * k if count_a > 1 else 0, "b_step": k * n if count_b > 1 else 0}
    args = [gpu.from_numpy(a), gpu.from_numpy(b), out]
    gpu.launch(batched_matmul(elem, blocking), args, blocking.grid(m, n, count), M=m, N=n, K=k, **steps)
    return gpu.to_numpy(out)


def operands(shape: tuple[int, ...], dtype: type) -> tuple[np.ndarray, np.ndarray]:
    count_a, count_b, m, k, n = shape
    draw = (lambda s: rng.integers(-100, 100, s, np.int32)) if dtype == np.int32 else rng.standard_normal
    return draw((count_a, m, k)).astype(dtype), draw((count_b, k, n)).astype(dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", ["tiled", "direct", "direct-fitted"])
def test_float32_products_match_numpy(gpu, name, shape):
    a, b = operands(shape, np.float32)
    _, _, m, k, n = shape
    blocking = {"tiled": TILED, "direct": DIRECT, "direct-fitted": DIRECT.fitted(m, n)}[name]
    want = np.matmul(a.astype(np.float64), b)
    np.testing.assert_allclose(product(gpu, blocking, a, b), want, rtol=1e-5, atol=1e-5 * np.sqrt(max(k, 1)))


@pytest.mark.parametrize("shape", SHAPES[3:6], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("blocking", [TILED, DIRECT], ids=["tiled", "direct"])
def test_float64_products_match_numpy(gpu, blocking, shape):
    if not gpu.runtime.float64:
        pytest.skip(f"{gpu.device_name()} does not compute in float64")
    a, b = operands(shape, np.float64)
    np.testing.assert_allclose(product(gpu, blocking, a, b), np.matmul(a, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", SHAPES[3:6], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("blocking", [TILED, DIRECT], ids=["tiled", "direct"])
def test_int32_products_are_exact(gpu, blocking, shape):
    a, b = operands(shape, np.int32)
    np.testing.assert_array_equal(product(gpu, blocking, a, b), np.matmul(a.astype(np.int64), b))


def test_fitting_shrinks_blocks_and_workgroups_to_small_outputs():
    assert DIRECT.fitted(342, 1536) == DIRECT
    assert DIRECT.fitted(1, 1536) == Blocking(rows=1, cols=16, group=(8, 1))
    assert DIRECT.fitted(128, 32) == Blocking(rows=16, cols=16, group=(2, 8))
    assert DIRECT.fitted(3, 5) == Blocking(rows=4, cols=8, group=(1, 1))
    assert DIRECT.fitted(20, 1).tile == (32, 1)


def test_the_table_takes_the_direct_blocking_on_cpu_devices_only(gpu, monkeypatch):
    """MatMul through the shared table: lavapipe and PoCL (CPU devices) run DIRECT fitted to the
    output, other devices TILED (CUDA's cuBLAS aside, which takes large float32 products)."""
    launched = []
    original = type(gpu).launch

    def spy(self, kernel, buffers, grid, **scalars):
        launched.append((kernel, grid))
        return original(self, kernel, buffers, grid, **scalars)

    monkeypatch.setattr(type(gpu), "launch", spy)
    a, b = rng.integers(-9, 9, (40, 24), np.int32), rng.integers(-9, 9, (24, 3), np.int32)
    ctx = KernelContext(Node("MatMul", [], []), 17, {}, gpu)
    out = gpu.kernels.find("", "MatMul", 17).fn(ctx, gpu.from_numpy(a), gpu.from_numpy(b))
    np.testing.assert_array_equal(gpu.to_numpy(out), a @ b)
    on_cpu = "(CPU" in gpu.device_name()
    blocking = DIRECT.fitted(40, 3) if on_cpu else TILED
    assert launched == [(batched_matmul(i32, blocking), blocking.grid(40, 3, 1))]
