"""The direct cuBLAS path (spawnml_cuda.cublas): each product's call, with the arguments cuBLAS's C
functions receive, is run by a stand-in for cuBLAS that computes what the BLAS standard says the
call computes (column-major operands read through their leading dimensions and batch strides)
over host memory, and compared with numpy's row-major product."""

from __future__ import annotations

import ctypes
import inspect
from typing import Any

import numpy as np
import pytest
from spawnml_cuda.cublas import (
    COMPUTE_32F,
    GEMM_DEFAULT,
    OP_N,
    R_32F,
    SIGNATURES,
    WORKSPACE_BYTES,
    Cublas,
    row_major_product,
)


class Memory:
    """Host arrays standing for device buffers, addressed by integers as device pointers are."""

    def __init__(self) -> None:
        self.arrays: dict[int, np.ndarray] = {}
        self.next = 1 << 20

    def put(self, array: np.ndarray) -> int:
        address = self.next
        self.arrays[address] = np.ascontiguousarray(array, np.float32).reshape(-1).copy()
        self.next += 1 << 20
        return address

    def at(self, address: int) -> np.ndarray:
        return self.arrays[address]


class StandInCublas:
    """cuBLAS's C functions this backend calls, over :class:`Memory`; each returns a status."""

    def __init__(self, memory: Memory, status: int = 0) -> None:
        self.memory = memory
        self.status = status
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def cublasCreate_v2(self, handle: Any) -> int:
        handle._obj.value = 7  # what ctypes.byref points at
        return 0

    def cublasSetStream_v2(self, handle: int, stream: int) -> int:
        self.calls.append(("setStream", (handle, stream)))
        return 0

    def cublasSetWorkspace_v2(self, handle: int, workspace: int, size: int) -> int:
        self.calls.append(("setWorkspace", (handle, workspace, size)))
        return 0

    def cublasGemmStridedBatchedEx(
        self, handle, transa, transb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb, stride_b,
        beta, c, c_type, ldc, stride_c, batch, compute, algo,
    ) -> int:  # fmt: skip
        self.calls.append(("gemm", (handle, transa, transb, a_type, b_type, c_type, compute, algo)))
        if self.status:
            return self.status
        scale, shift = ctypes.c_float.from_address(alpha).value, ctypes.c_float.from_address(beta).value
        first, second, out = self.memory.at(a), self.memory.at(b), self.memory.at(c)
        for i in range(batch):
            left = column_major(first, i * stride_a, m, k, lda)
            right = column_major(second, i * stride_b, k, n, ldb)
            result = scale * (left.astype(np.float64) @ right)
            if shift:
                result += shift * column_major(out, i * stride_c, m, n, ldc)
            for col in range(n):
                start = i * stride_c + col * ldc
                out[start : start + m] = result[:, col]
        return 0


def column_major(memory: np.ndarray, start: int, rows: int, cols: int, ld: int) -> np.ndarray:
    """The ``rows x cols`` matrix at ``start``, column ``j`` starting ``j * ld`` elements in."""
    assert ld >= rows
    return np.stack([memory[start + j * ld : start + j * ld + rows] for j in range(cols)], axis=1)


@pytest.fixture
def library() -> tuple[Cublas, StandInCublas, Memory]:
    memory = Memory()
    stand_in = StandInCublas(memory)
    return Cublas(stand_in, 0xABC, 0xDEF), stand_in, memory


def test_the_handle_has_the_stream_and_its_own_workspace(library):
    _, stand_in, _ = library
    assert stand_in.calls == [("setStream", (7, 0xABC)), ("setWorkspace", (7, 0xDEF, WORKSPACE_BYTES))]


@pytest.mark.parametrize(
    ("count", "m", "n", "k", "repeat_a", "repeat_b"),
    [
        (1, 5, 7, 3, False, False),
        (4, 6, 2, 9, False, False),
        (3, 8, 5, 4, False, True),  # a weight shared across the batch
        (3, 4, 6, 5, True, False),
        (2, 1, 16, 33, False, False),  # one row: a matrix-vector product
    ],
)
def test_products_match_numpy(library, count, m, n, k, repeat_a, repeat_b):
    cublas, stand_in, memory = library
    rng = np.random.default_rng(count * 100 + m)
    a = rng.standard_normal((1 if repeat_a else count, m, k)).astype(np.float32)
    b = rng.standard_normal((1 if repeat_b else count, k, n)).astype(np.float32)
    ptr_a, ptr_b, ptr_out = memory.put(a), memory.put(b), memory.put(np.full((count, m, n), np.nan))
    call = row_major_product(
        ptr_a, ptr_b, ptr_out, count, m, n, k, 0 if repeat_a else m * k, 0 if repeat_b else k * n
    )
    cublas.gemm(call)
    got = memory.at(ptr_out).reshape(count, m, n)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert stand_in.calls[-1] == ("gemm", (7, OP_N, OP_N, R_32F, R_32F, R_32F, COMPUTE_32F, GEMM_DEFAULT))


def test_a_failing_call_says_so(library):
    cublas, stand_in, memory = library
    stand_in.status = 13  # CUBLAS_STATUS_EXECUTION_FAILED
    a, b, out = memory.put(np.ones((2, 3))), memory.put(np.ones((3, 4))), memory.put(np.zeros((2, 4)))
    with pytest.raises(RuntimeError, match="cublasGemmStridedBatchedEx failed with cuBLAS status 13"):
        cublas.gemm(row_major_product(a, b, out, 1, 2, 4, 3, 6, 12))


def test_the_declared_signatures_take_what_cublas_takes():
    for name, arguments in SIGNATURES.items():
        if hasattr(StandInCublas, name):
            parameters = inspect.signature(getattr(StandInCublas, name)).parameters
            assert len(arguments) == len(parameters) - 1, name  # less self
