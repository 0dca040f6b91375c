"""Matrix multiplication tiled through workgroup memory."""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, u32
from ..lang import Buffer, Const, ReadBuffer, T, barrier, global_id, local_id, shared


@kernel(workgroup=("TILE", "TILE"))
def matmul(
    a: ReadBuffer[T],
    b: ReadBuffer[T],
    c: Buffer[T],
    M: u32,
    N: u32,
    K: u32,
    T: Const[Scalar],
    TILE: Const[int],
):
    """Row-major ``c[M, N] = a[M, K] @ b[K, N]``; launch ``(ceil(N / TILE), ceil(M / TILE))`` workgroups."""
    ta = shared(T, TILE * TILE)
    tb = shared(T, TILE * TILE)
    row = global_id(1)
    col = global_id(0)
    ty = local_id(1)
    tx = local_id(0)
    acc = T(0)
    for t in range(0, K, TILE):
        ka = t + tx
        ta[ty * TILE + tx] = a[row * K + ka] if row < M and ka < K else T(0)
        kb = t + ty
        tb[ty * TILE + tx] = b[kb * N + col] if kb < K and col < N else T(0)
        barrier()
        for k in range(u32(TILE)):
            acc += ta[ty * TILE + k] * tb[k * TILE + tx]
        barrier()
    if row < M and col < N:
        c[row * N + col] = acc
