"""``ai.spawnml::FusedElementwise`` on the CPU: the chain's kernel-IR expressions, written out
as one Python loop and compiled by numba, so the whole chain is one pass over memory with no
intermediate arrays. Compiled on first use, once per chain and per set of one-element inputs.

exp, tanh and erf are :mod:`.vector_math`'s, so that the loop vectorizes (numba's call libm
once per element); the other functions are libm's. Large passes are cut into spans of the flat
output over the threads (:func:`.elementwise.over_threads`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from spawnml.backend import KernelContext
from spawnml.errors import InvalidArgumentError
from spawnml.kernel import ir
from spawnml.kernel.library.chain import decode, step_values
from spawnml.ops.defs.fused import DOMAIN

from .elementwise import over_threads
from .table import KERNELS

FLOAT32 = np.dtype(np.float32)
#: Kernel-IR intrinsics as numba-compilable Python (``vm``: :mod:`.vector_math`).
_CALLS = {
    "sqrt": "np.sqrt",
    "rsqrt": "np.float32(1) / np.sqrt",
    "exp": "vm.exp",
    "log": "np.log",
    "erf": "vm.erf",
    "tanh": "vm.tanh",
    "sin": "np.sin",
    "cos": "np.cos",
    "tan": "np.tan",
    "asin": "np.arcsin",
    "acos": "np.arccos",
    "atan": "np.arctan",
    "sinh": "np.sinh",
    "cosh": "np.cosh",
    "asinh": "np.arcsinh",
    "acosh": "np.arccosh",
    "atanh": "np.arctanh",
    "floor": "np.floor",
    "ceil": "np.ceil",
    "pow": "np.power",
    "abs": "np.abs",
    "min": "min",
    "max": "max",
    "isnan": "np.isnan",
}
_OPERATORS = {"&&": "and", "||": "or"}


def python(e: ir.Expr) -> str:
    """A kernel-IR expression of float32 values as Python source numba compiles in float32."""
    match e:
        case ir.Const(value=value, dtype=dtype):
            return repr(bool(value)) if dtype == ir.bool_ else f"np.{dtype.numpy.name}({value!r})"
        case ir.Var(name=name):
            return name
        case ir.Unary(op=op, x=x):
            return f"({'not ' if op == '!' else op}{python(x)})"
        case ir.Binary(op=op, a=a, b=b):
            return f"({python(a)} {_OPERATORS.get(op, op)} {python(b)})"
        case ir.Call(fn=fn, args=args):
            return f"{_CALLS[fn]}({', '.join(map(python, args))})"
        case ir.Cast(x=x, dtype=dtype):
            return f"np.{dtype.numpy.name}({python(x)})"
        case ir.Select(cond=cond, a=a, b=b):
            return f"({python(a)} if {python(cond)} else {python(b)})"
    raise InvalidArgumentError(f"the CPU cannot compile the elementwise expression {e!r}")


def source(text: str, scalars: tuple[bool, ...]) -> str:
    """A Python loop computing the float32 chain ``text`` into ``out``, one element per iteration,
    over flat inputs; ``scalars`` marks the inputs of one element, read at index 0."""
    chain = decode(text, len(scalars))
    if any(np.dtype(s.dtype) != FLOAT32 for s in chain):
        raise InvalidArgumentError("the CPU FusedElementwise kernel computes float32 chains only")
    operands = [ir.Var(f"a{k}", ir.f32) for k in range(len(scalars))]
    values = step_values(chain, operands, [ir.f32] * len(chain))
    lines = [f"def fused(out, {', '.join(f'x{k}' for k in range(len(scalars)))}):"]
    lines.append("    for i in range(out.size):")
    lines += [f"        a{k} = x{k}[{0 if one else 'i'}]" for k, one in enumerate(scalars)]
    lines += [f"        s{j} = {python(value)}" for j, value in enumerate(values[:-1])]
    lines.append(f"        out[i] = {python(values[-1])}")
    return "\n".join(lines)


@functools.lru_cache(maxsize=256)
def compiled(text: str, scalars: tuple[bool, ...]) -> Callable[..., Any]:
    """The chain ``text`` compiled by numba (with numpy's float error model, so the loop
    vectorizes; without the GIL, so that spans of it run on several threads at once).

    The source is generated from the validated kernel IR alone: numbers and operator spellings,
    never text taken from the model file.
    """
    import numba

    from . import vector_math

    namespace: dict[str, Any] = {"np": np, "vm": vector_math}
    exec(compile(source(text, scalars), "<FusedElementwise>", "exec"), namespace)
    return numba.njit(error_model="numpy", nogil=True)(namespace["fused"])


@KERNELS.register("FusedElementwise", DOMAIN, dtypes=(np.float32,))
def fused_elementwise(ctx: KernelContext, *inputs: np.ndarray) -> np.ndarray:
    if any(x.dtype != FLOAT32 for x in inputs):
        kinds = sorted({str(x.dtype) for x in inputs})
        raise InvalidArgumentError(f"FusedElementwise on the CPU takes float32 inputs, got {kinds}")
    shape = np.broadcast_shapes(*(x.shape for x in inputs))
    out = np.empty(shape, FLOAT32)
    if out.size:
        flat = [_flat(x, shape, out.size) for x in inputs]
        kernel = compiled(ctx.attrs["chain"], tuple(x.size == 1 for x in flat))
        target = out.reshape(-1)

        def run(span: slice) -> None:
            kernel(target[span], *(x if x.size == 1 else x[span] for x in flat))

        over_threads(run, out.size)
    return out


def _flat(x: np.ndarray, shape: tuple[int, ...], size: int) -> np.ndarray:
    """``x`` as a contiguous 1-D array: itself when of one element or of the output's size (the
    same order), else broadcast to ``shape`` first."""
    if x.size not in (1, size):
        x = np.broadcast_to(x, shape)
    return np.ascontiguousarray(x).reshape(-1)
