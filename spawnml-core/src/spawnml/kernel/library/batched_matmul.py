"""Batched matrix products, register-blocked: each invocation accumulates a block of outputs.

``c[z] = a[z] @ b[z]`` for row-major ``[M, K] @ [K, N]`` matrices ``a_step`` / ``b_step`` elements
apart; a step of 0 broadcasts one matrix over the batch. A :class:`Blocking` says how the output
is split: an invocation at ``(x, y)`` of a ``group``-sized workgroup computes rows ``y + r * group_y``
and columns ``x + c * group_x`` of its workgroup's tile, so that neighbouring invocations touch
neighbouring memory, and keeps its ``rows x cols`` sums in registers.

Two blockings serve the devices:

- :data:`TILED`, for GPUs: 4 x 4 outputs per invocation, 16 x 16 invocations, and K in slices of 16
  staged through workgroup memory, each value loaded once per workgroup and read 16 times from it.
- :data:`DIRECT`, for devices that run on the CPU (Mesa's lavapipe, PoCL). There a workgroup runs
  as SIMD loops over its invocations on one core, a barrier switches between them and each load
  is a loop over the lanes, so the kernel reads straight from device memory, with no barrier, and
  does 8 multiply-adds per load: 16 x 16 outputs per invocation.

The blocks are unrolled when the kernel is built; the kernel language has no per-invocation
arrays, so the kernel is assembled as IR here (as :mod:`.chain` does) rather than parsed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

from .. import ir
from ..ir import Scalar, bool_, u32


@dataclass(frozen=True)
class Blocking:
    """``rows x cols`` outputs per invocation, ``group`` = ``(x, y)`` invocations per workgroup, and
    the K slice staged through workgroup memory (``depth``; 0 reads operands from device memory)."""

    rows: int
    cols: int
    group: tuple[int, int]
    depth: int = 0

    @property
    def tile(self) -> tuple[int, int]:
        """Output rows and columns per workgroup."""
        return self.rows * self.group[1], self.cols * self.group[0]

    def grid(self, m: int, n: int, count: int) -> tuple[int, int, int]:
        """Workgroups covering ``count`` outputs of ``m x n``."""
        rows, cols = self.tile
        return -(-n // cols), -(-m // rows), count

    def fitted(self, m: int, n: int) -> Blocking:
        """Blocks and workgroup shrunk, by powers of two, to an ``m x n`` output: for devices where
        an invocation past the output's edge costs as much as one inside it."""
        rows, cols = min(self.rows, _ceil_pow2(m)), min(self.cols, _ceil_pow2(n))
        x, y = self.group
        return replace(
            self,
            rows=rows,
            cols=cols,
            group=(min(x, _ceil_pow2(-(-n // cols))), min(y, _ceil_pow2(-(-m // rows)))),
        )


TILED = Blocking(rows=4, cols=4, group=(16, 16), depth=16)
DIRECT = Blocking(rows=16, cols=16, group=(8, 8))


def _ceil_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


@cache
def batched_matmul(t: Scalar, blocking: Blocking) -> ir.Kernel:
    """The product kernel over element type ``t``; launch over ``blocking.grid(M, N, batch)``."""
    params = (
        ir.Param("a", ir.BufferType(t, writable=False)),
        ir.Param("b", ir.BufferType(t, writable=False)),
        ir.Param("c", ir.BufferType(t, writable=True)),
        *(ir.Param(name, u32) for name in ("M", "N", "K", "a_step", "b_step")),
    )
    tile_m, tile_n = blocking.tile
    gx, gy = blocking.group
    body: list[ir.Stmt] = [
        ir.Declare("z", ir.Id("group", 2)),
        ir.Declare("a0", _mul(_u("z"), _u("a_step"))),
        ir.Declare("b0", _mul(_u("z"), _u("b_step"))),
        ir.Declare("row0", _add(_mul(ir.Id("group", 1), _c(tile_m)), ir.Id("local", 1))),
        ir.Declare("col0", _add(_mul(ir.Id("group", 0), _c(tile_n)), ir.Id("local", 0))),
    ]
    body += [ir.Declare(_acc(r, c), ir.Const(0, t)) for r, c in _block(blocking)]
    shared: tuple[ir.SharedArray, ...] = ()
    if blocking.depth:
        shared = (
            ir.SharedArray("ta", t, tile_m * blocking.depth),
            ir.SharedArray("tb", t, blocking.depth * tile_n),
        )
        body += _staged_sums(t, blocking)
    else:
        body += _direct_sums(t, blocking)
    body += _stores(t, blocking)
    return ir.Kernel(
        name="batched_matmul",
        params=params,
        shared=shared,
        body=tuple(body),
        workgroup=(gx, gy, 1),
        source=f"{__name__}.batched_matmul",
        dtypes=frozenset({t, u32, bool_}),
    )


def _direct_sums(t: Scalar, blocking: Blocking) -> list[ir.Stmt]:
    """Sums over K reading ``a`` and ``b`` from device memory. Rows and columns past the output's
    edge are clamped to its last, so every load is in bounds; their sums are not stored."""
    gx, gy = blocking.group
    last_row, last_col = _sub(_u("M"), _c(1)), _sub(_u("N"), _c(1))
    starts: list[ir.Stmt] = [
        ir.Declare(f"ar{r}", _add(_u("a0"), _mul(_min(_add(_u("row0"), _c(r * gy)), last_row), _u("K"))))
        for r in range(blocking.rows)
    ]
    starts += [
        ir.Declare(f"bc{c}", _add(_u("b0"), _min(_add(_u("col0"), _c(c * gx)), last_col)))
        for c in range(blocking.cols)
    ]
    step = _multiply_adds(
        t,
        blocking,
        lambda r: ir.Load("a", _add(_u(f"ar{r}"), _u("k")), t),
        lambda c: ir.Load("b", _add(_u(f"bc{c}"), _u("kn")), t),
    )
    return [*starts, ir.For("k", _c(0), _u("K"), 1, (ir.Declare("kn", _mul(_u("k"), _u("N"))), *step))]


def _staged_sums(t: Scalar, blocking: Blocking) -> list[ir.Stmt]:
    """Sums over K in slices of ``depth``: the workgroup copies its rows of ``a`` and columns of ``b``
    in the slice to workgroup memory (zeros past the edges), then each invocation reads its own."""
    depth, (gx, gy) = blocking.depth, blocking.group
    tile_m, tile_n = blocking.tile
    threads = gx * gy
    i, kk, j = _u("i"), _u("kk"), _u("j")
    copy_a = ir.For(
        "e",
        _u("flat"),
        _c(tile_m * depth),
        threads,
        (
            ir.Declare("i", _add(_u("arow"), _div(_u("e"), _c(depth)))),
            ir.Declare("kk", _add(_u("t"), _mod(_u("e"), _c(depth)))),
            ir.Store("ta", _u("e"), _guarded(t, "a", _add(_mul(i, _u("K")), kk), (i, "M"), (kk, "K"))),
        ),
    )
    copy_b = ir.For(
        "e",
        _u("flat"),
        _c(depth * tile_n),
        threads,
        (
            ir.Declare("kk", _add(_u("t"), _div(_u("e"), _c(tile_n)))),
            ir.Declare("j", _add(_u("bcol"), _mod(_u("e"), _c(tile_n)))),
            ir.Store("tb", _u("e"), _guarded(t, "b", _add(_mul(kk, _u("N")), j), (kk, "K"), (j, "N"))),
        ),
    )
    step = _multiply_adds(
        t,
        blocking,
        lambda r: ir.Load("ta", _add(_mul(_add(ir.Id("local", 1), _c(r * gy)), _c(depth)), _u("k")), t),
        lambda c: ir.Load("tb", _add(_mul(_u("k"), _c(tile_n)), _add(ir.Id("local", 0), _c(c * gx))), t),
    )
    slice_ = (copy_a, copy_b, ir.Barrier(), ir.For("k", _c(0), _c(depth), 1, tuple(step)), ir.Barrier())
    return [
        ir.Declare("flat", _add(_mul(ir.Id("local", 1), _c(gx)), ir.Id("local", 0))),
        ir.Declare("arow", _mul(ir.Id("group", 1), _c(tile_m))),
        ir.Declare("bcol", _mul(ir.Id("group", 0), _c(tile_n))),
        ir.For("t", _c(0), _u("K"), depth, slice_),
    ]


def _multiply_adds(
    t: Scalar, blocking: Blocking, row: Callable[[int], ir.Expr], col: Callable[[int], ir.Expr]
) -> list[ir.Stmt]:
    """One step of K: ``av[r] = row(r)``, ``bv[c] = col(c)``, then ``acc[r][c] += av[r] * bv[c]``."""
    loads = [ir.Declare(f"av{r}", row(r)) for r in range(blocking.rows)]
    loads += [ir.Declare(f"bv{c}", col(c)) for c in range(blocking.cols)]
    products = [
        (_acc(r, c), ir.Binary("*", ir.Var(f"av{r}", t), ir.Var(f"bv{c}", t), t)) for r, c in _block(blocking)
    ]
    return [*loads, *(ir.Assign(acc, ir.Binary("+", ir.Var(acc, t), p, t)) for acc, p in products)]


def _stores(t: Scalar, blocking: Blocking) -> list[ir.Stmt]:
    """``c[z, row, col] = acc`` for the block's rows and columns inside the output."""
    gx, gy = blocking.group
    out: list[ir.Stmt] = []
    for r in range(blocking.rows):
        row = _add(_u("row0"), _c(r * gy))
        stores = tuple(
            ir.If(
                _less(_add(_u("col0"), _c(c * gx)), _u("N")),
                (ir.Store("c", _add(_u("o"), _c(c * gx)), ir.Var(_acc(r, c), t)),),
                (),
            )
            for c in range(blocking.cols)
        )
        start = _add(_mul(_add(_mul(_u("z"), _u("M")), row), _u("N")), _u("col0"))
        out.append(ir.If(_less(row, _u("M")), (ir.Declare("o", start), *stores), ()))
    return out


def _guarded(
    t: Scalar, array: str, index: ir.Expr, first: tuple[ir.Expr, str], second: tuple[ir.Expr, str]
) -> ir.Expr:
    """``array[<array>0 + index]`` where each ``(i, size)`` has ``i < size``, else 0."""
    inside = ir.Binary("&&", _less(first[0], _u(first[1])), _less(second[0], _u(second[1])), bool_)
    return ir.Select(inside, ir.Load(array, _add(_u(f"{array}0"), index), t), ir.Const(0, t), t)


def _block(blocking: Blocking) -> list[tuple[int, int]]:
    return [(r, c) for r in range(blocking.rows) for c in range(blocking.cols)]


def _acc(r: int, c: int) -> str:
    return f"acc{r}_{c}"


def _u(name: str) -> ir.Var:
    return ir.Var(name, u32)


def _c(value: int) -> ir.Const:
    return ir.Const(value, u32)


def _add(x: ir.Expr, y: ir.Expr) -> ir.Expr:
    return ir.Binary("+", x, y, u32)


def _sub(x: ir.Expr, y: ir.Expr) -> ir.Expr:
    return ir.Binary("-", x, y, u32)


def _mul(x: ir.Expr, y: ir.Expr) -> ir.Expr:
    return ir.Binary("*", x, y, u32)


def _div(x: ir.Expr, y: ir.Expr) -> ir.Expr:
    return ir.Binary("/", x, y, u32)


def _mod(x: ir.Expr, y: ir.Expr) -> ir.Expr:
    return ir.Binary("%", x, y, u32)


def _min(x: ir.Expr, y: ir.Expr) -> ir.Expr:
    return ir.Call("min", (x, y), u32)


def _less(x: ir.Expr, y: ir.Expr) -> ir.Expr:
    return ir.Binary("<", x, y, bool_)
