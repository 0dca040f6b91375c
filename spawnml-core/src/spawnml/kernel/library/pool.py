"""Pooling over three spatial axes of ``x (N * C, D, H, W)`` (1-D and 2-D take size-1 axes).

Window sizes ``K*``, strides ``S*`` and dilations ``D*`` are constants; sizes and the begin
pads ``b*`` (and, for averages, the end pads ``e*``) are scalars. Launch one thread per
output element over a 2-D grid of ``width`` threads per row.
"""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, barrier, global_id, group_id, local_id, pow, shared


@kernel(workgroup=(64,))
def max_pool(
    x: ReadBuffer[T],
    y: Buffer[T],
    indices: Buffer[i32],
    n: u32,
    width: u32,
    D: i32,
    H: i32,
    W: i32,
    OD: i32,
    OH: i32,
    OW: i32,
    bd: i32,
    bh: i32,
    bw: i32,
    T: Const[Scalar],
    KD: Const[int],
    KH: Const[int],
    KW: Const[int],
    SD: Const[int],
    SH: Const[int],
    SW: Const[int],
    DD: Const[int],
    DH: Const[int],
    DW: Const[int],
    INDICES: Const[bool],
    COLUMN_MAJOR: Const[bool],
):
    """The largest input under each window; padding never wins. With ``INDICES``, ``indices``
    gets the first maximum's flat position in ``x``, its spatial axes ``COLUMN_MAJOR`` or not."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        j = i32(i)
        ow = j % OW
        oh = (j // OW) % OH
        od = (j // (OW * OH)) % OD
        plane = j // (OW * OH * OD)
        best = T(0)
        argmax = 0
        found = False
        for kd in range(KD):
            iz = od * SD - bd + kd * DD
            for kh in range(KH):
                iy = oh * SH - bh + kh * DH
                for kw in range(KW):
                    ix = ow * SW - bw + kw * DW
                    if 0 <= iz < D and 0 <= iy < H and 0 <= ix < W:
                        at = ((plane * D + iz) * H + iy) * W + ix
                        v = x[at]
                        if not found or v > best:
                            best = v
                            argmax = at
                            if COLUMN_MAJOR:
                                argmax = plane * D * H * W + (ix * H + iy) * D + iz
                        found = True
        y[i] = best
        if INDICES:
            indices[i] = argmax


@kernel(workgroup=(64,))
def average_pool(
    x: ReadBuffer[T],
    y: Buffer[T],
    n: u32,
    width: u32,
    D: i32,
    H: i32,
    W: i32,
    OD: i32,
    OH: i32,
    OW: i32,
    bd: i32,
    bh: i32,
    bw: i32,
    ed: i32,
    eh: i32,
    ew: i32,
    T: Const[Scalar],
    KD: Const[int],
    KH: Const[int],
    KW: Const[int],
    SD: Const[int],
    SH: Const[int],
    SW: Const[int],
    DD: Const[int],
    DH: Const[int],
    DW: Const[int],
    INCLUDE_PAD: Const[bool],
):
    """The mean of each window over the taps inside the input, or inside input and pads
    with ``INCLUDE_PAD`` (a ``ceil_mode`` window's taps beyond the pads never count)."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        j = i32(i)
        ow = j % OW
        oh = (j // OW) % OH
        od = (j // (OW * OH)) % OD
        plane = j // (OW * OH * OD)
        total = T(0)
        count = 0
        for kd in range(KD):
            iz = od * SD - bd + kd * DD
            for kh in range(KH):
                iy = oh * SH - bh + kh * DH
                for kw in range(KW):
                    ix = ow * SW - bw + kw * DW
                    if 0 <= iz < D and 0 <= iy < H and 0 <= ix < W:
                        total += x[((plane * D + iz) * H + iy) * W + ix]
                        count += 1
                    elif INCLUDE_PAD and -bd <= iz < D + ed and -bh <= iy < H + eh and -bw <= ix < W + ew:
                        count += 1
        y[i] = total / T(count)


@kernel(workgroup=("BLOCK",))
def global_pool(
    x: ReadBuffer[T],
    y: Buffer[T],
    rows: u32,
    across: u32,
    D: u32,
    T: Const[Scalar],
    BLOCK: Const[int],
    AVERAGE: Const[bool],
):
    """``y[r]`` = the mean (``AVERAGE``) or maximum of the ``D`` contiguous values of row ``r``.

    One workgroup of ``BLOCK`` threads (a power of two) per row; launch ``(across, ceil(rows /
    across))`` workgroups.
    """
    tile = shared(T, BLOCK)
    row = group_id(1) * across + group_id(0)
    base = min(row, rows - 1) * D
    lid = local_id(0)
    acc = x[base]
    if AVERAGE:
        acc = T(0)
    for k in range(lid, D, BLOCK):
        if AVERAGE:
            acc += x[base + k]
        else:
            acc = max(acc, x[base + k])
    tile[lid] = acc
    barrier()
    stride = u32(BLOCK // 2)
    while stride > 0:
        if lid < stride:
            if AVERAGE:
                tile[lid] += tile[lid + stride]
            else:
                tile[lid] = max(tile[lid], tile[lid + stride])
        barrier()
        stride = stride // 2
    if lid == 0 and row < rows:
        y[row] = tile[0] / T(D) if AVERAGE else tile[0]


@kernel(workgroup=(64,))
def lp_pool(
    x: ReadBuffer[T],
    y: Buffer[T],
    n: u32,
    width: u32,
    D: i32,
    H: i32,
    W: i32,
    OD: i32,
    OH: i32,
    OW: i32,
    bd: i32,
    bh: i32,
    bw: i32,
    T: Const[Scalar],
    KD: Const[int],
    KH: Const[int],
    KW: Const[int],
    SD: Const[int],
    SH: Const[int],
    SW: Const[int],
    DD: Const[int],
    DH: Const[int],
    DW: Const[int],
    P: Const[int],
):
    """The ``P``-norm of each window, ``sum(|x| ** P) ** (1 / P)`` (padding adds nothing)."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        j = i32(i)
        ow = j % OW
        oh = (j // OW) % OH
        od = (j // (OW * OH)) % OD
        plane = j // (OW * OH * OD)
        total = T(0)
        for kd in range(KD):
            iz = od * SD - bd + kd * DD
            for kh in range(KH):
                iy = oh * SH - bh + kh * DH
                for kw in range(KW):
                    ix = ow * SW - bw + kw * DW
                    if 0 <= iz < D and 0 <= iy < H and 0 <= ix < W:
                        total += pow(abs(x[((plane * D + iz) * H + iy) * W + ix]), T(P))
        y[i] = pow(total, T(1.0 / P))
