"""``ai.spawnml::FusedElementwise`` on the CPU: the chain's kernel-IR expressions, written out
as one Python scalar function and compiled by numba into a broadcasting ufunc, so the whole
chain is one pass over memory with no intermediate arrays. One ufunc per chain and input
types, compiled on first use."""

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

from .table import KERNELS

FLOAT32 = np.dtype(np.float32)
#: Kernel-IR intrinsics as numba-compilable Python (``math.erf``: numpy has none).
_CALLS = {
    "sqrt": "np.sqrt",
    "rsqrt": "np.float32(1) / np.sqrt",
    "exp": "np.exp",
    "log": "np.log",
    "erf": "math.erf",
    "tanh": "np.tanh",
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


def source(text: str, inputs: int) -> str:
    """The Python function computing the chain ``text`` of float32 steps over ``inputs`` operands."""
    chain = decode(text, inputs)
    if any(np.dtype(s.dtype) != FLOAT32 for s in chain):
        raise InvalidArgumentError("the CPU FusedElementwise kernel computes float32 chains only")
    operands = [ir.Var(f"v{k}", ir.f32) for k in range(inputs)]
    values = step_values(chain, operands, [ir.f32] * len(chain))
    lines = [f"def fused({', '.join(v.name for v in operands)}):"]
    lines += [f"    s{j} = {python(value)}" for j, value in enumerate(values[:-1])]
    lines.append(f"    return {python(values[-1])}")
    return "\n".join(lines)


@functools.lru_cache(maxsize=256)
def compiled(text: str, inputs: int) -> Callable[..., Any]:
    """The numba ufunc of the chain ``text`` (float32 operands, float32 result)."""
    import math

    import numba

    namespace: dict[str, Any] = {"np": np, "math": math}
    exec(compile(source(text, inputs), f"<FusedElementwise {text[:60]}>", "exec"), namespace)
    return numba.vectorize([f"float32({', '.join(['float32'] * inputs)})"])(namespace["fused"])


@KERNELS.register("FusedElementwise", DOMAIN, dtypes=(np.float32,))
def fused_elementwise(ctx: KernelContext, *inputs: np.ndarray) -> np.ndarray:
    if any(x.dtype != FLOAT32 for x in inputs):
        kinds = sorted({str(x.dtype) for x in inputs})
        raise InvalidArgumentError(f"FusedElementwise on the CPU takes float32 inputs, got {kinds}")
    with np.errstate(all="ignore"):
        return np.asarray(compiled(ctx.attrs["chain"], len(inputs))(*inputs), FLOAT32)
