"""Batched float32 products through cuBLAS directly: one ``cublasGemmStridedBatchedEx`` call.

``cupy.matmul`` builds arrays, broadcasts and checks on every call; a plan's products are already
laid out (row-major, contiguous, one operand repeated or not), so their call is marshalled once
here and made through cupy's own binding of cuBLAS (the library cupy loaded), on a handle of
this runtime's with its own workspace, so that the call can be captured in a graph.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import Any

import numpy as np

#: cuBLAS's enums (cublas_api.h, library_types.h): no transpose, float32 data, float32 compute
#: (full precision: no TF32), the default algorithm.
OP_N, R_32F, COMPUTE_32F, GEMM_DEFAULT = 0, 0, 68, -1
#: The workspace cuBLAS gets on this runtime's handle: NVIDIA's advice for Hopper, and enough for
#: earlier devices; owning it keeps cuBLAS from allocating while a graph is captured.
WORKSPACE_BYTES = 32 << 20
#: alpha = 1 and beta = 0, read from host memory by cuBLAS (its default pointer mode).
_ONE, _ZERO = np.ones(1, np.float32), np.zeros(1, np.float32)


@dataclass(frozen=True)
class StridedGemm:
    """One ``cublasGemmStridedBatchedEx`` call without transposes: ``C_i = A_i B_i`` for
    ``batch`` column-major matrices, ``M x K`` by ``K x N``, each operand ``stride`` elements
    after the last (0: the same matrix for every ``i``)."""

    m: int
    n: int
    k: int
    a: int
    lda: int
    stride_a: int
    b: int
    ldb: int
    stride_b: int
    c: int
    ldc: int
    stride_c: int
    batch: int


def row_major_product(
    a: int, b: int, out: int, count: int, m: int, n: int, k: int, a_step: int, b_step: int
) -> StridedGemm:
    """The call computing ``out[i] = a[i] @ b[i]`` for row-major ``m x k`` and ``k x n`` matrices
    at device addresses ``a``, ``b``, ``out`` (steps in elements, 0 repeating that operand).

    A row-major matrix is its transpose read column-major, so cuBLAS computes
    ``out^T = b^T a^T``: ``b`` is its first operand, ``a`` its second, and nothing is transposed.
    """
    return StridedGemm(n, m, k, b, n, b_step, a, k, a_step, out, n, m * n, count)


class Cublas:
    """A cuBLAS handle of one stream, with its own workspace, making :class:`StridedGemm` calls.

    ``library`` is a module with cupy's binding's functions (``cupy_backends.cuda.libs.cublas``);
    ``workspace`` a device buffer (a cupy memory pointer) of :data:`WORKSPACE_BYTES` the handle keeps.
    """

    def __init__(self, library: Any, stream: Any, workspace: Any) -> None:
        self.library = library
        self.stream = stream
        self.workspace = workspace
        self.handle = library.create()
        # cupy's binding sets the handle's stream to cupy's current one before each call.
        with stream:
            library.setStream(self.handle, stream.ptr)
            library.setWorkspace(self.handle, workspace.ptr, WORKSPACE_BYTES)

    def version(self) -> int:
        return int(self.library.getVersion(self.handle))

    def gemm(self, call: StridedGemm) -> None:
        """Queue ``call`` on the stream."""
        m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c, batch = astuple(call)
        with self.stream:
            self.library.gemmStridedBatchedEx(
                self.handle, OP_N, OP_N, m, n, k,
                _ONE.ctypes.data, a, R_32F, lda, stride_a, b, R_32F, ldb, stride_b,
                _ZERO.ctypes.data, c, R_32F, ldc, stride_c,
                batch, COMPUTE_32F, GEMM_DEFAULT,
            )  # fmt: skip
