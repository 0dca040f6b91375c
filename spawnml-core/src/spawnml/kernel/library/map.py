"""Elementwise maps: one result per output element, its value an expression spliced into the IR.

:func:`map1` and :func:`map2` compute ``out[i] = R(...)`` from the loaded operands;
:func:`with_value` replaces that value with any expression over the operand variables
``a`` and ``b`` (of type ``T``), so two kernels serve every unary and binary operator.
:func:`map3` is the select of Where. Launch over a 2-D grid of ``width`` threads per row.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..frontend import kernel
from ..ir import Kernel, Scalar, i32, u32
from ..lang import Buffer, Const, R, ReadBuffer, T, global_id


def with_value(k: Kernel, value: ir.Expr, name: str) -> Kernel:
    """``k`` with every store to ``out`` writing ``value`` instead, renamed ``name``."""

    def walk(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in body:
            if isinstance(s, ir.Store) and s.array == "out":
                s = replace(s, value=value)
            elif isinstance(s, ir.If):
                s = replace(s, body=walk(s.body), orelse=walk(s.orelse))
            out.append(s)
        return tuple(out)

    return replace(k, name=name, body=walk(k.body), dtypes=k.dtypes | {value.dtype})


@kernel(workgroup=(64,))
def map1(x: ReadBuffer[T], out: Buffer[R], n: u32, width: u32, T: Const[Scalar], R: Const[Scalar]):
    """``out[i] = f(x[i])`` over ``n`` contiguous elements."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        a = x[i]
        out[i] = R(a)


@kernel(workgroup=(64,))
def map2(
    x: ReadBuffer[T],
    y: ReadBuffer[T],
    out: Buffer[R],
    dims: ReadBuffer[u32],
    n: u32,
    width: u32,
    T: Const[Scalar],
    R: Const[Scalar],
    RANK: Const[int],
):
    """``out[i] = f(x[., y[.)`` with numpy broadcasting; ``dims`` = out shape, x strides, y strides."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        rest = i
        ix = u32(0)
        iy = u32(0)
        for d in range(RANK - 1, -1, -1):
            coord = rest % dims[d]
            rest = rest // dims[d]
            ix += coord * dims[RANK + d]
            iy += coord * dims[2 * RANK + d]
        a = x[ix]
        b = y[iy]
        out[i] = R(a + b)


@kernel(workgroup=(64,))
def map3(
    cond: ReadBuffer[i32],
    x: ReadBuffer[T],
    y: ReadBuffer[T],
    out: Buffer[T],
    dims: ReadBuffer[u32],
    n: u32,
    width: u32,
    T: Const[Scalar],
    RANK: Const[int],
):
    """``out[i] = x if cond else y`` with broadcasting; ``dims`` = out shape and three stride rows."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        rest = i
        ic = u32(0)
        ix = u32(0)
        iy = u32(0)
        for d in range(RANK - 1, -1, -1):
            coord = rest % dims[d]
            rest = rest // dims[d]
            ic += coord * dims[RANK + d]
            ix += coord * dims[2 * RANK + d]
            iy += coord * dims[3 * RANK + d]
        c = cond[ic]
        a = x[ix]
        b = y[iy]
        out[i] = a if c != 0 else b
