"""Batched matrix multiplication tiled through workgroup memory."""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, u32
from ..lang import Buffer, Const, ReadBuffer, barrier, global_id, group_id, local_id, shared


@kernel(workgroup=("TILE", "TILE"))
def batched_matmul(
    a: ReadBuffer[T],  # noqa: F821
    b: ReadBuffer[T],  # noqa: F821
    c: Buffer[T],  # noqa: F821
    M: u32,
    N: u32,
    K: u32,
    a_step: u32,
    b_step: u32,
    T: Const[Scalar],
    TILE: Const[int],
):
    """``c[z] = a[z] @ b[z]`` for row-major ``[M, K] @ [K, N]`` matrices ``a_step``/``b_step`` apart.

    A step of 0 broadcasts one matrix over the batch. Launch ``(ceil(N / TILE), ceil(M / TILE), batch)``.
    """
    ta = shared(T, TILE * TILE)
    tb = shared(T, TILE * TILE)
    z = group_id(2)
    a0 = z * a_step
    b0 = z * b_step
    row = global_id(1)
    col = global_id(0)
    ty = local_id(1)
    tx = local_id(0)
    acc = T(0)
    for t in range(0, K, TILE):
        ka = t + tx
        ta[ty * TILE + tx] = a[a0 + row * K + ka] if row < M and ka < K else T(0)
        kb = t + ty
        tb[ty * TILE + tx] = b[b0 + kb * N + col] if kb < K and col < N else T(0)
        barrier()
        for k in range(u32(TILE)):
            acc += ta[ty * TILE + k] * tb[k * TILE + tx]
        barrier()
    if row < M and col < N:
        c[z * M * N + row * N + col] = acc
