"""Reductions on the GPU: ReduceSum / Mean / Max / Min / Prod / L1 / L2 / LogSum / LogSumExp / SumSquare and
ArgMax / ArgMin, one thread per output element over generated row kernels; TopK, one thread per row;
LpNormalization, a norm row kernel and one generated division; MeanVarianceNormalization, mean
reductions and generated chains.

Reduced axes that are adjacent are read in place (rows ``inner`` apart); others are first
transposed behind the kept ones. An empty reduction gives the operator's identity (``-inf``
for Max, 0 for LogSum's sum, ...), as onnxruntime does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.library.chain import Step, step
from ..kernel.library.reductions import FLOAT_KINDS, arg_kernel, reduce_kernel
from ..kernel.library.topk import top_k as top_k_kernel
from ..ops.defs.reduce import AXES_INPUT_SINCE
from .array import DeviceArray
from .fused import run_chain, scalar
from .host import axes_argument, to_host
from .shapes import axis_index
from .table import ALL_FLOATS, FLOATS, GPU_KERNELS, GPUContext, permuted

#: The value of each reduction over no elements, given the element type.
_EMPTY = {
    "Max": lambda t: -np.inf if t.kind == "f" else False if t.kind == "b" else np.iinfo(t).min,
    "Min": lambda t: np.inf if t.kind == "f" else True if t.kind == "b" else np.iinfo(t).max,
    "Prod": lambda t: 1,
    "LogSum": lambda t: -np.inf,
    "LogSumExp": lambda t: -np.inf,
}


def _rows(ctx: GPUContext, x: DeviceArray, reduced: Sequence[int]) -> tuple[DeviceArray, int, int]:
    """``x`` (transposed when the reduced axes are apart), the row length ``D`` and ``inner``."""
    rank = len(x.shape)
    first, last = reduced[0], reduced[-1]
    if list(reduced) == list(range(first, last + 1)):
        return x, math.prod(x.shape[first : last + 1]), math.prod(x.shape[last + 1 :])
    kept = [i for i in range(rank) if i not in reduced]
    return permuted(ctx, x, kept + list(reduced)), math.prod(x.shape[i] for i in reduced), 1


def _shape(x: DeviceArray, reduced: Sequence[int], keep: bool) -> tuple[int, ...]:
    return tuple(1 if i in reduced else d for i, d in enumerate(x.shape) if keep or i not in reduced)


def reduce(ctx: GPUContext, kind: str, x: DeviceArray, axes: DeviceArray | None) -> DeviceArray:
    """The ``kind`` reduction of ``x`` over the node's axes."""
    if kind in FLOAT_KINDS and not x.elem.is_float:
        raise InvalidArgumentError(f"Reduce{kind} on the GPU takes float tensors, not {x.dtype}")
    chosen = axes_argument(ctx, axes)
    if not chosen and ctx.attrs.get("noop_with_empty_axes", 0):
        return x
    rank = len(x.shape)
    reduced = sorted({axis_index(a, rank) for a in chosen} if chosen else range(rank))
    shape = _shape(x, reduced, bool(ctx.attrs.get("keepdims", 1)))
    rows = math.prod(shape)
    if x.size == 0:
        value = _EMPTY.get(kind, lambda t: 0)(x.dtype)
        return ctx.backend.from_numpy(np.full(shape, value, x.dtype))
    source, size, inner = _rows(ctx, x, reduced)
    out = ctx.backend.empty(shape, x.dtype)
    ctx.backend.launch_flat(reduce_kernel(kind, x.elem), [source, out], rows, D=size, inner=inner)
    return out


def arg(ctx: GPUContext, x: DeviceArray, largest: bool) -> DeviceArray:
    """ArgMax / ArgMin along ``axis``: int64 indices."""
    axis = axis_index(int(ctx.attrs.get("axis", 0)), len(x.shape))
    shape = _shape(x, [axis], bool(ctx.attrs.get("keepdims", 1)))
    out = ctx.backend.empty(shape, np.dtype(np.int64))
    if out.size:
        if x.shape[axis] == 0:
            raise InvalidArgumentError(f"Arg{'Max' if largest else 'Min'} over an empty axis {axis}")
        k = arg_kernel(largest, bool(ctx.attrs.get("select_last_index", 0)), x.elem)
        inner = math.prod(x.shape[axis + 1 :])
        ctx.backend.launch_flat(k, [x, out], out.size, D=x.shape[axis], inner=inner)
    return out


def top_k(ctx: GPUContext, x: DeviceArray, k: int) -> tuple[DeviceArray, DeviceArray]:
    """The ``k`` largest (or smallest) values along ``axis``, in order, and their int64 indices."""
    axis = axis_index(int(ctx.attrs.get("axis", -1)), len(x.shape))
    if not 0 <= k <= x.shape[axis]:
        raise InvalidArgumentError(f"TopK: k={k} is not within the {x.shape[axis]} elements of axis {axis}")
    shape = (*x.shape[:axis], k, *x.shape[axis + 1 :])
    values, indices = ctx.backend.empty(shape, x.dtype), ctx.backend.empty(shape, np.dtype(np.int64))
    if values.size:
        kernel = top_k_kernel.specialize(T=x.elem, LARGEST=bool(ctx.attrs.get("largest", 1)))
        inner = math.prod(x.shape[axis + 1 :])
        ctx.backend.launch_flat(
            kernel, [x, values, indices], values.size // k, D=x.shape[axis], K=k, inner=inner
        )
    return values, indices


def _p_one_or_two(node: Node, opset: int) -> str | None:
    return None if node.attrs.get("p", 2) in (1, 2) else f"p={node.attrs['p']} is not 1 or 2"


@GPU_KERNELS.register("LpNormalization", check=_p_one_or_two, dtypes=FLOATS)
def lp_normalization(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    """``x`` over its L1 or L2 norm along ``axis``; 0 where the norm is 0."""
    axis = axis_index(int(ctx.attrs.get("axis", -1)), len(x.shape))
    if x.size == 0:
        return x
    norm = ctx.backend.empty(_shape(x, [axis], keep=True), x.dtype)
    kernel = reduce_kernel("L1" if ctx.attrs.get("p", 2) == 1 else "L2", x.elem)
    inner = math.prod(x.shape[axis + 1 :])
    ctx.backend.launch_flat(kernel, [x, norm], norm.size, D=x.shape[axis], inner=inner)
    zero = ctx.backend.from_numpy(np.zeros((), x.dtype))
    steps = (
        step("Div", [0, 1], x.dtype.name),
        step("Equal", [1, 2], "bool"),
        step("Where", [4, 2, 3], x.dtype.name),
    )
    return run_chain(ctx, steps, [x, norm, zero], "lp_normalization")


#: What MeanVarianceNormalization adds to the standard deviation, as onnxruntime does.
MVN_EPSILON = 1e-9


@GPU_KERNELS.register("MeanVarianceNormalization", since=9, dtypes=FLOATS)
def mean_variance_normalization(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    """``(x - mean) / (std + 1e-9)`` over ``axes`` (the node's, default 0, 2, 3): two mean reductions
    and two generated chains."""
    mean = reduce(ctx, "Mean", x, None)
    steps: tuple[Step, ...] = (step("Sub", [0, 1], "float32"), step("Mul", [2, 2], x.dtype.name))
    squares = run_chain(ctx, steps, [x, mean], "centred_squares")
    variance = reduce(ctx, "Mean", squares, None)
    steps = (
        step("Sub", [0, 1], "float32"),
        step("Sqrt", [2], "float32"),
        step("Add", [5, 3], "float32"),
        step("Div", [4, 6], x.dtype.name),
    )
    return run_chain(ctx, steps, [x, mean, variance, scalar(ctx, MVN_EPSILON)], "mean_variance_normalization")


def _register() -> None:
    for kind in ("Sum", "Mean", "Max", "Min", "Prod", "L1", "L2", "LogSum", "LogSumExp", "SumSquare"):
        name, since = f"Reduce{kind}", AXES_INPUT_SINCE[f"Reduce{kind}"]
        dtypes = ALL_FLOATS if kind in FLOAT_KINDS else None
        GPU_KERNELS.register(name, until=since, dtypes=dtypes)(
            lambda ctx, x, _k=kind: reduce(ctx, _k, x, None)
        )
        GPU_KERNELS.register(name, since=since, dtypes=dtypes)(
            lambda ctx, x, axes=None, _k=kind: reduce(ctx, _k, x, axes)
        )
    GPU_KERNELS.register("ArgMax")(lambda ctx, x: arg(ctx, x, largest=True))
    GPU_KERNELS.register("ArgMin")(lambda ctx, x: arg(ctx, x, largest=False))
    GPU_KERNELS.register("TopK", until=10)(lambda ctx, x: top_k(ctx, x, int(ctx.attrs["k"])))
    GPU_KERNELS.register("TopK", since=10)(
        lambda ctx, x, k: top_k(ctx, x, int(to_host(ctx, k).reshape(-1)[0]))
    )


_register()
