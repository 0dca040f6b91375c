"""Convolutions over three spatial axes (1-D and 2-D inputs take size-1 leading axes).

Layouts are ONNX's: ``x (N, C, D, H, W)``, Conv weights ``(M, C / G, KD, KH, KW)``,
ConvTranspose weights ``(C, M / G, KD, KH, KW)``, ``y (N, M, OD, OH, OW)``, one bias per
output channel. Kernel sizes ``K*``, strides ``S*`` and dilations ``D*`` (depth, height,
width) are constants; sizes, channels, groups ``G`` and begin pads ``p*`` are scalars, so a
new input size does not compile a new program. The stored value of ``y`` is a plain
variable, so :func:`activated` can wrap it in an activation (FusedConv).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from .. import ir
from ..frontend import kernel
from ..ir import Kernel, Scalar, i32, u32
from ..lang import Buffer, Const, ReadBuffer, T, barrier, global_id, group_id, local_id, shared


def activated(k: Kernel, activation: Callable[[ir.Expr], ir.Expr], name: str) -> Kernel:
    """``k`` with every value it stores to ``y`` passed through ``activation``, renamed ``name``."""

    def walk(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in body:
            if isinstance(s, ir.Store) and s.array == "y":
                s = replace(s, value=activation(s.value))
            elif isinstance(s, ir.If):
                s = replace(s, body=walk(s.body), orelse=walk(s.orelse))
            elif isinstance(s, ir.For | ir.While):
                s = replace(s, body=walk(s.body))
            out.append(s)
        return tuple(out)

    return replace(k, name=name, body=walk(k.body))


@kernel(workgroup=(64,))
def conv_direct(
    x: ReadBuffer[T],
    w: ReadBuffer[T],
    bias: ReadBuffer[T],
    y: Buffer[T],
    n: u32,
    width: u32,
    C: i32,
    M: i32,
    G: i32,
    D: i32,
    H: i32,
    W: i32,
    OD: i32,
    OH: i32,
    OW: i32,
    pd: i32,
    ph: i32,
    pw: i32,
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
):
    """One thread per output element: the sum over its group's channels and the kernel taps.

    Best where each output reads few values (depthwise and small-channel convolutions).
    """
    i = global_id(1) * width + global_id(0)
    if i < n:
        j = i32(i)
        ow = j % OW
        oh = (j // OW) % OH
        od = (j // (OW * OH)) % OD
        m = (j // (OW * OH * OD)) % M
        b = j // (OW * OH * OD * M)
        cg = C // G
        first = (m // (M // G)) * cg
        acc = T(0)
        for c in range(cg):
            plane = (b * C + first + c) * D
            for kd in range(KD):
                iz = od * SD - pd + kd * DD
                if 0 <= iz < D:
                    for kh in range(KH):
                        iy = oh * SH - ph + kh * DH
                        if 0 <= iy < H:
                            for kw in range(KW):
                                ix = ow * SW - pw + kw * DW
                                if 0 <= ix < W:
                                    tap = ((m * cg + c) * KD + kd) * KH + kh
                                    acc += x[((plane + iz) * H + iy) * W + ix] * w[tap * KW + kw]
        out = acc + bias[m]
        y[i] = out


@kernel(workgroup=("TILE", "TILE"))
def conv_gemm(
    x: ReadBuffer[T],
    w: ReadBuffer[T],
    bias: ReadBuffer[T],
    y: Buffer[T],
    C: i32,
    M: i32,
    G: i32,
    D: i32,
    H: i32,
    W: i32,
    OD: i32,
    OH: i32,
    OW: i32,
    pd: i32,
    ph: i32,
    pw: i32,
    T: Const[Scalar],
    TILE: Const[int],
    KD: Const[int],
    KH: Const[int],
    KW: Const[int],
    SD: Const[int],
    SH: Const[int],
    SW: Const[int],
    DD: Const[int],
    DH: Const[int],
    DW: Const[int],
):
    """Convolution as a matrix product tiled through workgroup memory (implicit im2col).

    For image ``b`` and group ``g`` (workgroup ``z = b * G + g``), ``y[b, g]`` is the
    ``(M / G, K)`` weight matrix times the ``(K, OD * OH * OW)`` im2col matrix, ``K =
    C / G * KD * KH * KW``; each tile of the im2col matrix is gathered from ``x`` as it is
    loaded, so the matrix is never stored. Launch ``(ceil(P / TILE), ceil(M / G / TILE), N * G)``.
    """
    ta = shared(T, TILE * TILE)
    tb = shared(T, TILE * TILE)
    z = i32(group_id(2))
    g = z % G
    b = z // G
    cg = C // G
    mg = M // G
    taps = KD * KH * KW
    depth = cg * taps
    positions = OD * OH * OW
    row = i32(global_id(1))
    col = i32(global_id(0))
    ty = i32(local_id(1))
    tx = i32(local_id(0))
    z0 = (col // (OW * OH)) * SD - pd
    y0 = ((col // OW) % OH) * SH - ph
    x0 = (col % OW) * SW - pw
    planes = (b * C + g * cg) * D
    acc = T(0)
    for t in range(0, depth, TILE):
        ka = t + tx
        ta[ty * TILE + tx] = w[(g * mg + row) * depth + ka] if row < mg and ka < depth else T(0)
        kb = t + ty
        value = T(0)
        if kb < depth and col < positions:
            r = kb % taps
            iz = z0 + (r // (KH * KW)) * DD
            iy = y0 + ((r // KW) % KH) * DH
            ix = x0 + (r % KW) * DW
            if 0 <= iz < D and 0 <= iy < H and 0 <= ix < W:
                value = x[((planes + (kb // taps) * D + iz) * H + iy) * W + ix]
        tb[ty * TILE + tx] = value
        barrier()
        for k in range(TILE):
            acc += ta[ty * TILE + k] * tb[k * TILE + tx]
        barrier()
    if row < mg and col < positions:
        m = g * mg + row
        out = acc + bias[m]
        y[(b * M + m) * positions + col] = out


@kernel(workgroup=(64,))
def conv_transpose(
    x: ReadBuffer[T],
    w: ReadBuffer[T],
    bias: ReadBuffer[T],
    y: Buffer[T],
    n: u32,
    width: u32,
    C: i32,
    M: i32,
    G: i32,
    D: i32,
    H: i32,
    W: i32,
    OD: i32,
    OH: i32,
    OW: i32,
    pd: i32,
    ph: i32,
    pw: i32,
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
):
    """Transposed convolution, one thread per output element gathering the inputs that reach it.

    Input position ``i`` reaches output ``i * S - p + k * D``; ``p*`` are the cropped begins.
    """
    i = global_id(1) * width + global_id(0)
    if i < n:
        j = i32(i)
        ow = j % OW
        oh = (j // OW) % OH
        od = (j // (OW * OH)) % OD
        m = (j // (OW * OH * OD)) % M
        b = j // (OW * OH * OD * M)
        cg = C // G
        mg = M // G
        first = (m // mg) * cg
        acc = T(0)
        for c in range(cg):
            plane = (b * C + first + c) * D
            for kd in range(KD):
                tz = od + pd - kd * DD
                iz = tz // SD
                if tz >= 0 and tz % SD == 0 and iz < D:
                    for kh in range(KH):
                        ty = oh + ph - kh * DH
                        iy = ty // SH
                        if ty >= 0 and ty % SH == 0 and iy < H:
                            for kw in range(KW):
                                tx = ow + pw - kw * DW
                                ix = tx // SW
                                if tx >= 0 and tx % SW == 0 and ix < W:
                                    tap = (((first + c) * mg + m % mg) * KD + kd) * KH + kh
                                    acc += x[((plane + iz) * H + iy) * W + ix] * w[tap * KW + kw]
        out = acc + bias[m]
        y[i] = out
