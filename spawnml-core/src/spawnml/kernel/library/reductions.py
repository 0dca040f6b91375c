"""Row reductions generated from an accumulator description: one thread per output element
folds its row of ``D`` elements ``inner`` apart, starting at ``(r // inner) * D * inner + r % inner``.

Each kind (the ONNX Reduce* operators, ArgMax / ArgMin) is an initial value, a fold step and a
finishing expression over the scalar operators of :mod:`.scalar_ops`, so Max and Min keep NaN.
Rows are not empty (callers fill empty reductions with the identity). Launch ``rows`` threads
over a 2-D grid of ``width`` threads per grid row.
"""

from __future__ import annotations

from functools import cache

from .. import ir
from ..ir import Scalar, bool_, i32, u32
from .scalar_ops import OPS, const, largest

#: The reductions :func:`reduce_kernel` writes, and ArgMax / ArgMin (by :func:`arg_kernel`).
KINDS = ("Sum", "Mean", "Max", "Min", "Prod", "L1", "L2", "LogSum", "LogSumExp", "SumSquare")
FLOAT_KINDS = frozenset({"Mean", "L2", "LogSum", "LogSumExp"})


def _u(name: str) -> ir.Var:
    return ir.Var(name, u32)


def _row_prologue() -> tuple[ir.Expr, list[ir.Stmt]]:
    """The ``if r < rows`` condition and the statements declaring ``base``."""
    r = ir.Binary("+", ir.Binary("*", ir.Id("global", 1), _u("width"), u32), ir.Id("global", 0), u32)
    outer = ir.Binary("/", _u("r"), _u("inner"), u32)
    start = ir.Binary("*", ir.Binary("*", outer, _u("D"), u32), _u("inner"), u32)
    base = ir.Binary("+", start, ir.Binary("%", _u("r"), _u("inner"), u32), u32)
    return r, [ir.Declare("base", base)]


def _element(k: ir.Expr, t: Scalar) -> ir.Expr:
    return ir.Load("x", ir.Binary("+", _u("base"), ir.Binary("*", k, _u("inner"), u32), u32), t)


def _kernel(name: str, t: Scalar, r: Scalar, body: list[ir.Stmt]) -> ir.Kernel:
    gid, prologue = _row_prologue()
    params = (
        ir.Param("x", ir.BufferType(t, writable=False)),
        ir.Param("out", ir.BufferType(r, writable=True)),
        ir.Param("rows", u32),
        ir.Param("width", u32),
        ir.Param("D", u32),
        ir.Param("inner", u32),
    )
    inside = ir.If(ir.Binary("<", _u("r"), _u("rows"), bool_), (*prologue, *body), ())
    return ir.Kernel(
        name,
        params,
        (),
        (ir.Declare("r", gid), inside),
        (64, 1, 1),
        f"{__name__}.{name}",
        frozenset({t, r, u32, i32, bool_}),
    )


def _fold(acc: ir.Var, op: str, value: ir.Expr) -> ir.Stmt:
    return ir.Assign(acc.name, OPS[op].build((acc, value), {}, acc.dtype))


@cache
def reduce_kernel(kind: str, t: Scalar) -> ir.Kernel:
    """``out[r]`` = the ``kind`` reduction of row ``r`` of ``x`` (element type ``t``)."""
    acc = ir.Var("acc", t)
    k = ir.Var("k", u32)
    x = ir.Var("v", t)
    first = _element(ir.Const(0, u32), t)
    body: list[ir.Stmt] = []
    if kind == "LogSumExp":  # log(sum(exp(x - max))) + max, the max found first
        top = ir.Var("top", t)
        body += [ir.Declare("top", first), _loop(k, [ir.Declare("v", _element(k, t)), _fold(top, "Max", x)])]
        step = OPS["Exp"].build((OPS["Sub"].build((x, top), {}, t),), {}, t)
        body += [
            ir.Declare("acc", const(0, acc)),
            _loop(k, [ir.Declare("v", _element(k, t)), _fold(acc, "Add", step)]),
        ]
        infinite = ir.Binary(">", ir.Call("abs", (top,), t), largest(top), bool_)  # exp(inf - inf) is NaN
        result = ir.Select(infinite, top, OPS["Add"].build((OPS["Log"].build((acc,), {}, t), top), {}, t), t)
    else:
        init, op, term = {
            "Sum": (const(0, acc), "Add", x),
            "Mean": (const(0, acc), "Add", x),
            "Max": (first, "Max", x),
            "Min": (first, "Min", x),
            "Prod": (const(1, acc), "Mul", x),
            "L1": (const(0, acc), "Add", OPS["Abs"].build((x,), {}, t)),
            "L2": (const(0, acc), "Add", OPS["Mul"].build((x, x), {}, t)),
            "SumSquare": (const(0, acc), "Add", OPS["Mul"].build((x, x), {}, t)),
            "LogSum": (const(0, acc), "Add", x),
        }[kind]
        body += [ir.Declare("acc", init), _loop(k, [ir.Declare("v", _element(k, t)), _fold(acc, op, term)])]
        result = {
            "Mean": OPS["Div"].build((acc, ir.Cast(_u("D"), t)), {}, t),
            "L2": OPS["Sqrt"].build((acc,), {}, t),
            "LogSum": OPS["Log"].build((acc,), {}, t),
        }.get(kind, acc)
    body.append(ir.Store("out", _u("r"), result))
    return _kernel(f"reduce_{kind.lower()}_{t}", t, t, body)


@cache
def arg_kernel(largest: bool, last: bool, t: Scalar) -> ir.Kernel:
    """``out[r]`` = the index of row ``r``'s largest (or smallest) element, the first or ``last``
    of equal ones; a NaN counts as the largest, like numpy's."""
    k = ir.Var("k", u32)
    x, best = ir.Var("v", t), ir.Var("best", t)
    symbol = (">=" if last else ">") if largest else ("<=" if last else "<")
    better = ir.Binary(symbol, x, best, bool_)
    if t.is_float:
        nan = OPS["IsNaN"].build((x,), {}, bool_)
        better = ir.Binary(
            "&&",
            ir.Unary("!", OPS["IsNaN"].build((best,), {}, bool_), bool_),
            ir.Binary("||", better, nan, bool_),
            bool_,
        )
    update = ir.If(better, (ir.Assign("best", x), ir.Assign("index", k)), ())
    body = [
        ir.Declare("best", _element(ir.Const(0, u32), t)),
        ir.Declare("index", ir.Const(0, u32)),
        ir.For("k", ir.Const(1, u32), _u("D"), 1, (ir.Declare("v", _element(k, t)), update)),
        ir.Store("out", _u("r"), ir.Cast(ir.Var("index", u32), i32)),
    ]
    name = f"arg{'max' if largest else 'min'}{'_last' if last else ''}_{t}"
    return _kernel(name, t, i32, body)


def _loop(k: ir.Var, body: list[ir.Stmt]) -> ir.For:
    return ir.For(k.name, ir.Const(0, u32), _u("D"), 1, tuple(body))
