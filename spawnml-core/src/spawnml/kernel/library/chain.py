"""Elementwise chains: a list of scalar operators over broadcast inputs, and the one kernel
generated from it.

A chain is what ``ai.spawnml::FusedElementwise`` carries (as JSON, see :func:`encode`), and a
single operator is a chain of one step. :func:`chain_kernel` writes its kernel IR: each thread
computes one output element, reads every input once at its broadcast position, evaluates the
steps in order as local values and stores the last. Inputs of the output's full shape are read
at the thread's own index; the others through a ``dims`` buffer of the output shape and one
stride row per broadcast input (0 along broadcast axes). Launch ``n`` threads over a 2-D grid
of ``width`` threads per grid row, like the other maps.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from .. import ir
from ..ir import KernelError, Scalar, bool_, f32, i32, u32
from .scalar_ops import OPS


@dataclass(frozen=True)
class Step:
    """One operator of a chain: ``inputs`` index the chain's inputs, then earlier steps' results.

    ``dtype`` is the numpy name of the step's result type; ``attrs`` are the operator's.
    """

    op: str
    inputs: tuple[int, ...]
    dtype: str
    attrs: tuple[tuple[str, Any], ...] = ()

    @property
    def attributes(self) -> dict[str, Any]:
        return dict(self.attrs)


Chain = tuple[Step, ...]


def step(op: str, inputs: Sequence[int], dtype: str, attrs: Mapping[str, Any] | None = None) -> Step:
    """A :class:`Step` with hashable attributes."""
    frozen = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in (attrs or {}).items()))
    return Step(op, tuple(inputs), dtype, frozen)


def encode(chain: Chain) -> str:
    """The chain as the JSON text of FusedElementwise's ``chain`` attribute."""
    return json.dumps([[s.op, list(s.inputs), s.dtype, dict(s.attrs)] for s in chain], separators=(",", ":"))


def decode(text: str, inputs: int) -> Chain:
    """The chain in ``text``, checked against ``inputs`` operands; raises KernelError when malformed."""
    try:
        chain = tuple(step(op, refs, dtype, attrs) for op, refs, dtype, attrs in json.loads(text))
    except (ValueError, TypeError) as e:
        raise KernelError(f"malformed elementwise chain {text[:80]!r}: {e}") from None
    for index, s in enumerate(chain):
        if s.op not in OPS:
            raise KernelError(f"elementwise chain step {index}: unknown operator {s.op!r}")
        if any(not isinstance(r, int) or not 0 <= r < inputs + index for r in s.inputs) or not s.inputs:
            raise KernelError(
                f"elementwise chain step {index} ({s.op}) reads undefined values {list(s.inputs)}"
            )
    if not chain:
        raise KernelError("an elementwise chain has at least one step")
    return chain


def step_values(chain: Chain, operands: Sequence[ir.Expr], types: Sequence[Scalar]) -> list[ir.Expr]:
    """Each step's expression over ``operands`` and the variables ``s0``, ``s1``, ... holding the
    earlier steps' results; ``types`` are the steps' device types."""
    names = list(operands)
    values = []
    for j, (s, r) in enumerate(zip(chain, types, strict=True)):
        values.append(OPS[s.op].build([names[i] for i in s.inputs], s.attributes, r))
        names.append(ir.Var(f"s{j}", values[-1].dtype))
    return values


def _var(name: str, dtype: Scalar) -> ir.Var:
    return ir.Var(name, dtype)


def _u32(value: int) -> ir.Const:
    return ir.Const(value, u32)


@cache
def chain_kernel(
    name: str,
    chain: Chain,
    inputs: tuple[Scalar, ...],
    types: tuple[Scalar, ...],
    rank: int,
    strided: tuple[bool, ...],
) -> ir.Kernel:
    """The kernel computing ``chain`` over inputs of device types ``inputs``; ``types`` are the
    steps' device types (the last is the output's), ``strided`` marks the broadcast inputs."""
    params = [ir.Param(f"x{k}", ir.BufferType(t, writable=False)) for k, t in enumerate(inputs)]
    params.append(ir.Param("out", ir.BufferType(types[-1], writable=True)))
    gid = ir.Binary("+", ir.Binary("*", ir.Id("global", 1), _var("width", u32), u32), ir.Id("global", 0), u32)
    body: list[ir.Stmt] = []
    offsets = {k: _var("i", u32) for k in range(len(inputs)) if not strided[k]}
    if any(strided):
        params.append(ir.Param("dims", ir.BufferType(u32, writable=False)))
        body.append(ir.Declare("rest", _var("i", u32)))
        rows = [k for k in range(len(inputs)) if strided[k]]
        for k in rows:
            body.append(ir.Declare(f"o{k}", _u32(0)))
            offsets[k] = _var(f"o{k}", u32)
        d = _var("d", i32)
        dim = ir.Load("dims", d, u32)
        loop: list[ir.Stmt] = [
            ir.Declare("coord", ir.Binary("%", _var("rest", u32), dim, u32)),
            ir.Assign("rest", ir.Binary("/", _var("rest", u32), dim, u32)),
        ]
        for row, k in enumerate(rows, start=1):
            stride = ir.Load("dims", ir.Binary("+", d, ir.Const(row * rank, i32), i32), u32)
            step_k = ir.Binary("*", _var("coord", u32), stride, u32)
            loop.append(ir.Assign(f"o{k}", ir.Binary("+", _var(f"o{k}", u32), step_k, u32)))
        body.append(ir.For("d", ir.Const(rank - 1, i32), ir.Const(-1, i32), -1, tuple(loop)))
    operands = []
    for k, t in enumerate(inputs):
        body.append(ir.Declare(f"v{k}", ir.Load(f"x{k}", offsets[k], t)))
        operands.append(_var(f"v{k}", t))
    values = step_values(chain, operands, types)
    body += [ir.Declare(f"s{j}", value) for j, value in enumerate(values[:-1])]
    body.append(ir.Store("out", _var("i", u32), values[-1]))
    params += [ir.Param("n", u32), ir.Param("width", u32)]
    return ir.Kernel(
        name=name,
        params=tuple(params),
        shared=(),
        body=(
            ir.Declare("i", gid),
            ir.If(ir.Binary("<", _var("i", u32), _var("n", u32), bool_), tuple(body), ()),
        ),
        workgroup=(64, 1, 1),
        source=f"{__name__}.chain_kernel",
        dtypes=frozenset({*inputs, *types, u32, i32, f32, bool_}),
    )
