"""Buffers bound in parts: a kernel rewritten to read and write one buffer through several bindings.

A device may allocate buffers larger than one kernel may bind (WebGPU's storage binding size). A
buffer parameter split into ``count`` parts of ``chunk`` elements becomes parameters
``name__0`` … ``name__{count-1}``, each bound to a window of the buffer. Every load picks its
element from the part that holds it (each part's index clamped into that part, so every load stays
in bounds whatever the language evaluates), and every store goes to that part alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from .ir import (
    Binary,
    BufferType,
    Call,
    Const,
    Expr,
    If,
    Kernel,
    KernelError,
    Load,
    Param,
    Select,
    Stmt,
    Store,
    bool_,
)

#: How one buffer is split: ``(count, chunk)``, parts of ``chunk`` elements (the last may be shorter).
Parts = tuple[int, int]


def part_name(name: str, part: int) -> str:
    """The parameter taking part ``part`` of buffer ``name``."""
    return f"{name}__{part}"


def split_buffers(k: Kernel, parts: Mapping[str, Parts]) -> Kernel:
    """``k`` with each buffer named in ``parts`` bound as that many windows, in parameter order;
    ``k`` itself when ``parts`` is empty."""
    if not parts:
        return k
    params: list[Param] = []
    for p in k.params:
        if p.name not in parts:
            params.append(p)
        elif not isinstance(p.type, BufferType) or p.atomic:
            what = "atomic" if p.atomic else "scalar"
            raise KernelError(f"kernel {k.name} cannot take its {what} parameter {p.name} in parts")
        else:
            params.extend(replace(p, name=part_name(p.name, j)) for j in range(parts[p.name][0]))
    return replace(k, params=tuple(params), body=tuple(_rewrite(s, parts) for s in k.body))


def _rewrite(node: Any, parts: Mapping[str, Parts]) -> Any:
    """``node`` (an expression, statement or tuple of them) with the split buffers' accesses routed."""
    if isinstance(node, tuple):
        return tuple(_rewrite(x, parts) for x in node)
    if isinstance(node, Load) and node.array in parts:
        return _load(node.array, _rewrite(node.index, parts), node.dtype, *parts[node.array])
    if isinstance(node, Store) and node.array in parts:
        index, value = _rewrite(node.index, parts), _rewrite(node.value, parts)
        return _store(node.array, index, value, *parts[node.array])
    if not isinstance(node, Expr | Stmt):
        return node
    changed = {f.name: _rewrite(getattr(node, f.name), parts) for f in fields(node)}
    return replace(node, **changed)


def _load(array: str, index: Expr, dtype: Any, count: int, chunk: int) -> Expr:
    """The element at ``index``: each part loaded at the index clamped into it, the right one selected."""
    value = _part_load(array, index, dtype, count - 1, chunk, last=True)
    for j in range(count - 2, -1, -1):
        below = Binary("<", index, Const((j + 1) * chunk, index.dtype), bool_)
        value = Select(below, _part_load(array, index, dtype, j, chunk, last=False), value, dtype)
    return value


def _part_load(array: str, index: Expr, dtype: Any, j: int, chunk: int, last: bool) -> Expr:
    start = j * chunk
    inside = index
    if start:
        inside = Call("max", (inside, Const(start, index.dtype)), index.dtype)
    if not last:
        inside = Call("min", (inside, Const(start + chunk - 1, index.dtype)), index.dtype)
    return Load(part_name(array, j), _minus(inside, start), dtype)


def _store(array: str, index: Expr, value: Expr, count: int, chunk: int) -> Stmt:
    """A store to the part holding ``index``."""
    stmt: Stmt = Store(part_name(array, count - 1), _minus(index, (count - 1) * chunk), value)
    for j in range(count - 2, -1, -1):
        below = Binary("<", index, Const((j + 1) * chunk, index.dtype), bool_)
        stmt = If(below, (Store(part_name(array, j), _minus(index, j * chunk), value),), (stmt,))
    return stmt


def _minus(index: Expr, start: int) -> Expr:
    return Binary("-", index, Const(start, index.dtype), index.dtype) if start else index
