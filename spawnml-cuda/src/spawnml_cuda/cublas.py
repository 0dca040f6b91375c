"""Batched float32 products through cuBLAS directly: one ``cublasGemmStridedBatchedEx`` call.

``cupy.matmul`` builds arrays, broadcasts and checks on every call, and cupy's binding sets its
handle's stream before each one (which resets cuBLAS's workspace, and which some cupy versions
refuse while a stream is captured). A plan's products are already laid out (row-major,
contiguous, one operand repeated or not), so their call is marshalled once here and made through
ctypes on a handle of the runtime's own, bound once to its stream and to a workspace of its own:
nothing is allocated or reset per call, so the call can be captured in a CUDA graph.
"""

from __future__ import annotations

import ctypes
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

#: cuBLAS's enums (cublas_api.h, library_types.h): no transpose, float32 data, float32 compute
#: (full precision: no TF32), the default algorithm.
OP_N, R_32F, COMPUTE_32F, GEMM_DEFAULT = 0, 0, 68, -1
#: The workspace cuBLAS gets on this runtime's handle: NVIDIA's advice for Hopper, and enough for
#: earlier devices; owning it keeps cuBLAS from allocating while a graph is captured.
WORKSPACE_BYTES = 32 << 20
#: alpha = 1 and beta = 0, read from host memory by cuBLAS (its default pointer mode).
_ONE, _ZERO = ctypes.c_float(1.0), ctypes.c_float(0.0)

_P, _I, _L = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
#: The C signatures of the functions called (all return a ``cublasStatus_t``).
SIGNATURES = {
    "cublasCreate_v2": [ctypes.POINTER(_P)],
    "cublasSetStream_v2": [_P, _P],
    "cublasSetWorkspace_v2": [_P, _P, ctypes.c_size_t],
    "cublasGetVersion_v2": [_P, ctypes.POINTER(_I)],
    "cublasGemmStridedBatchedEx": [
        _P, _I, _I, _I, _I, _I, _P, _P, _I, _I, _L, _P, _I, _I, _L, _P, _P, _I, _I, _L, _I, _I, _I,
    ],
}  # fmt: skip


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


def load_cublas() -> ctypes.CDLL:
    """The cuBLAS that cupy loaded into this process, with the signatures of :data:`SIGNATURES`
    declared."""
    import cupy

    cupy.cuda.device.get_cublas_handle()  # cupy's own handle: cuBLAS is loaded once it has one
    maps = Path("/proc/self/maps")
    paths = {line.split()[-1] for line in maps.read_text().splitlines()} if maps.exists() else set()
    found = sorted(p for p in paths if Path(p).name.startswith("libcublas.so"))
    if not found:
        raise OSError("cupy loaded no libcublas.so into this process")
    library = ctypes.CDLL(found[0])
    for name, arguments in SIGNATURES.items():
        function = getattr(library, name)
        function.argtypes, function.restype = arguments, ctypes.c_int
    return library


class Cublas:
    """A cuBLAS handle bound to one stream and a workspace of its own, making :class:`StridedGemm`
    calls. ``library`` has cuBLAS's functions (:func:`load_cublas`); ``stream`` and ``workspace``
    (of :data:`WORKSPACE_BYTES`, kept by the caller) are device addresses."""

    def __init__(self, library: Any, stream: int, workspace: int) -> None:
        self.library = library
        handle = ctypes.c_void_p()
        self._check("cublasCreate_v2", library.cublasCreate_v2(ctypes.byref(handle)))
        self.handle = handle.value
        self._check("cublasSetStream_v2", library.cublasSetStream_v2(self.handle, stream))
        self._check(
            "cublasSetWorkspace_v2", library.cublasSetWorkspace_v2(self.handle, workspace, WORKSPACE_BYTES)
        )

    def version(self) -> int:
        version = ctypes.c_int()
        self._check(
            "cublasGetVersion_v2", self.library.cublasGetVersion_v2(self.handle, ctypes.byref(version))
        )
        return version.value

    def gemm(self, call: StridedGemm) -> None:
        """Queue ``call`` on the stream."""
        m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c, batch = astuple(call)
        status = self.library.cublasGemmStridedBatchedEx(
            self.handle, OP_N, OP_N, m, n, k,
            ctypes.addressof(_ONE), a, R_32F, lda, stride_a, b, R_32F, ldb, stride_b,
            ctypes.addressof(_ZERO), c, R_32F, ldc, stride_c,
            batch, COMPUTE_32F, GEMM_DEFAULT,
        )  # fmt: skip
        if status:  # the kernel that asked is named by the plan, which wraps this error
            raise RuntimeError(f"cublasGemmStridedBatchedEx failed with cuBLAS status {status}: {call}")

    @staticmethod
    def _check(name: str, status: int) -> None:
        if status:
            raise RuntimeError(f"{name} failed with cuBLAS status {status}")
