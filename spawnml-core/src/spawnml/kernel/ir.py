"""The kernel IR: typed parameters, statements and expressions, free of any GPU language."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import SpawnMLError


class KernelError(SpawnMLError):
    """A kernel uses something outside the kernel language, or breaks its type rules."""


@dataclass(frozen=True)
class Scalar:
    """An element type. Inside a kernel, calling it casts: ``f32(i)``."""

    name: str
    kind: str  # "f" float, "i" signed, "u" unsigned, "b" bool
    bits: int

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(np.bool_ if self.kind == "b" else f"{self.kind}{self.bits // 8}")

    def __call__(self, value: Any) -> Any:
        raise KernelError(f"{self.name}(...) is a cast inside a kernel; kernels are rendered, not called")

    def __repr__(self) -> str:
        return self.name


f32 = Scalar("f32", "f", 32)
f64 = Scalar("f64", "f", 64)
f16 = Scalar("f16", "f", 16)
i32 = Scalar("i32", "i", 32)
u32 = Scalar("u32", "u", 32)
bool_ = Scalar("bool", "b", 8)


@dataclass(frozen=True)
class BufferType:
    """A device array parameter; ``writable`` is False for read-only inputs."""

    elem: Scalar
    writable: bool


@dataclass(frozen=True)
class Param:
    """A runtime parameter; buffers used by ``atomic_add`` have ``atomic`` set."""

    name: str
    type: Scalar | BufferType
    atomic: bool = False


@dataclass(frozen=True)
class SharedArray:
    """A workgroup-memory array of ``size`` elements."""

    name: str
    dtype: Scalar
    size: int


# Expressions: every one carries its result type.
@dataclass(frozen=True)
class Const:
    value: bool | int | float
    dtype: Scalar


@dataclass(frozen=True)
class Var:
    name: str
    dtype: Scalar


@dataclass(frozen=True)
class Load:
    array: str
    index: Expr
    dtype: Scalar


@dataclass(frozen=True)
class Unary:
    op: str  # "-", "!", "~"
    x: Expr
    dtype: Scalar


@dataclass(frozen=True)
class Binary:
    op: str  # C spelling: "+", "/", "<", "&&", "<<", ...
    a: Expr
    b: Expr
    dtype: Scalar


@dataclass(frozen=True)
class Call:
    fn: str  # a math intrinsic: "exp", "rsqrt", "erf", "min", ...
    args: tuple[Expr, ...]
    dtype: Scalar


@dataclass(frozen=True)
class Cast:
    x: Expr
    dtype: Scalar


@dataclass(frozen=True)
class Select:
    cond: Expr
    a: Expr  # when cond holds
    b: Expr
    dtype: Scalar


@dataclass(frozen=True)
class Id:
    kind: str  # "global", "local", "group"
    axis: int
    dtype: Scalar = u32


@dataclass(frozen=True)
class AtomicAdd:
    """Adds ``value`` to ``array[index]`` atomically; evaluates to the old value."""

    array: str
    index: Expr
    value: Expr
    dtype: Scalar


Expr = Const | Var | Load | Unary | Binary | Call | Cast | Select | Id | AtomicAdd


# Statements.
@dataclass(frozen=True)
class Declare:
    name: str
    value: Expr


@dataclass(frozen=True)
class Assign:
    name: str
    value: Expr


@dataclass(frozen=True)
class Store:
    array: str
    index: Expr
    value: Expr


@dataclass(frozen=True)
class If:
    cond: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]


@dataclass(frozen=True)
class For:
    """``for var in range(start, stop, step)`` with a constant, non-zero step."""

    var: str
    start: Expr
    stop: Expr
    step: int
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class While:
    cond: Expr
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class Eval:
    """An expression run for its effect (an atomic whose old value is unused)."""

    value: Expr


@dataclass(frozen=True)
class Barrier:
    """Workgroup barrier over workgroup and device memory."""


@dataclass(frozen=True)
class Break:
    pass


@dataclass(frozen=True)
class Continue:
    pass


@dataclass(frozen=True)
class Return:
    pass


Stmt = Declare | Assign | Store | If | For | While | Eval | Barrier | Break | Continue | Return


@dataclass(frozen=True)
class Kernel:
    """One specialised kernel, ready to render."""

    name: str
    params: tuple[Param, ...]
    shared: tuple[SharedArray, ...]
    body: tuple[Stmt, ...]
    workgroup: tuple[int, int, int]
    source: str  # "file:line" of the Python definition
    dtypes: frozenset[Scalar]  # every type the kernel uses

    # Cached: read on every launch. (``cached_property`` writes the instance dict, which a frozen
    # dataclass without slots allows.)
    @cached_property
    def buffers(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if isinstance(p.type, BufferType))

    @cached_property
    def scalars(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if isinstance(p.type, Scalar))
