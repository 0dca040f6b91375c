"""The kernel table every GPU backend shares: each entry picks a library kernel, specialises it,
computes its grid and scalars, and asks the backend to launch it.

Shapes go in as scalars or small stride buffers, so a new input length does not compile a
new program. Shape-like inputs (Reshape's shape, Slice's bounds, axes) are read on the host:
free for initializers, which keep their host values, one small read-back otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np

from ..backend import KernelContext
from ..dtypes import from_onnx
from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel import ir
from ..kernel.ir import Kernel, Scalar, f32, i32
from ..kernel.library.batched_matmul import DIRECT, TILED, batched_matmul
from ..kernel.library.bfloat16 import round_to_bfloat16
from ..kernel.library.map import map1, map2, map3, with_value
from ..kernel.library.movement import gather, strided_copy
from ..kernel.library.remainder import integer_power
from ..kernel.library.rows import layernorm_rows, softmax_rows
from ..kernel.library.scalar_ops import OPS as SCALAR_OPS
from .array import NARROW_FLOATS, PHYSICAL, DeviceArray
from .host import axes_argument, to_host
from .narrow import NARROWED, narrowed
from .registry import GPU_KERNELS
from .shapes import axis_index, broadcast_strides, contiguous_strides

if TYPE_CHECKING:
    from .backend import GPUBackend

    class GPUContext(KernelContext):
        """The context of a kernel in :data:`GPU_KERNELS`: only a :class:`GPUBackend` runs them."""

        backend: GPUBackend

else:
    GPUContext = KernelContext

#: What the float-only kernels computing in float32 take (the 16-bit floats held as float32);
#: declared so that other types are refused at load.
FLOATS = (np.float32, np.float16, ml_dtypes.bfloat16)
#: What the float-only kernels computing in the tensor's own type take: float64 as well, where the
#: device holds it.
ALL_FLOATS = (*FLOATS, np.float64)
Array = DeviceArray
#: Integers from an attribute, or read back from the device.
Ints = Sequence[int] | np.ndarray


# Elementwise ------------------------------------------------------------------------------
@cache
def _mapped(op: str, t: Scalar, r: Scalar, rank: int | None) -> Kernel:
    """``map1`` (contiguous, ``rank`` None) or ``map2`` (broadcasting) computing ``op``."""
    base = map1.specialize(T=t, R=r) if rank is None else map2.specialize(T=t, R=r, RANK=rank)
    operands = (ir.Var("a", t),) if rank is None else (ir.Var("a", t), ir.Var("b", t))
    return with_value(base, SCALAR_OPS[op].build(operands, {}, r), f"{op.lower()}_{t}_{r}")


_FLOAT_ONLY = {"Pow", "Sqrt", "Erf", "Tanh", "Exp", "Log", "Sigmoid", "Reciprocal"}
_COMPARISONS = {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"}


def _elem_of(op: str, x: Array) -> Scalar:
    if op in _FLOAT_ONLY and not x.elem.is_float:
        raise InvalidArgumentError(f"{op} on the GPU takes float tensors, not {x.dtype}")
    return x.elem


def unary(ctx: GPUContext, op: str, x: Array, out_dtype: np.dtype | None = None) -> Array:
    """``op`` on every element of ``x``."""
    out = ctx.backend.empty(x.shape, out_dtype or x.dtype)
    k = _mapped(op, _elem_of(op, x), out.elem, None)
    ctx.backend.launch_flat(k, [x, out], out.size)
    return out


def binary(ctx: GPUContext, op: str, x: Array, y: Array) -> Array:
    """``op`` on ``x`` and ``y`` broadcast against each other."""
    shape = np.broadcast_shapes(x.shape, y.shape)
    out = ctx.backend.empty(shape, np.dtype(np.bool_) if op in _COMPARISONS else x.dtype)
    meta = ctx.backend.constant(
        [*shape, *broadcast_strides(x.shape, shape), *broadcast_strides(y.shape, shape)]
    )
    k = _mapped(op, _elem_of(op, x), out.elem, len(shape))
    ctx.backend.launch_flat(k, [x, y, out, meta], out.size)
    return out


def _register_elementwise() -> None:
    for op in ("Add", "Sub", "Mul", "Div", "Equal", "Greater", "Less", "And", "Or", "Xor"):
        GPU_KERNELS.register(op, until=7)(
            lambda ctx, x, y, _op=op: binary(ctx, _op, x, legacy_operand(ctx, x, y))
        )
        GPU_KERNELS.register(op, since=7)(lambda ctx, x, y, _op=op: binary(ctx, _op, x, y))
    for op in ("GreaterOrEqual", "LessOrEqual"):
        GPU_KERNELS.register(op, since=12)(lambda ctx, x, y, _op=op: binary(ctx, _op, x, y))
    for op in ("Max", "Min"):  # before opset 8 the inputs have one shape, which broadcasting keeps
        GPU_KERNELS.register(op)(lambda ctx, *xs, _op=op: _variadic(ctx, _op, xs))
    for op in ("Sqrt", "Erf", "Tanh", "Exp", "Log", "Abs", "Neg", "Relu", "Sigmoid", "Reciprocal", "Not"):
        GPU_KERNELS.register(op)(lambda ctx, x, _op=op: unary(ctx, _op, x))


def legacy_operand(ctx: GPUContext, a: Array, b: Array) -> Array:
    """Before opset 7, ``broadcast=1`` lays B's dims onto A's from ``axis`` (default: trailing)."""
    if not ctx.attrs.get("broadcast"):
        return b
    rank, axis = len(a.shape), ctx.attrs.get("axis")
    start = rank - len(b.shape) if axis is None else int(axis) % max(rank, 1)
    return b.view((*b.shape, *[1] * (rank - start - len(b.shape))))


@GPU_KERNELS.register("Pow", until=7, dtypes=ALL_FLOATS)
def pow_legacy(ctx: GPUContext, x: Array, y: Array) -> Array:
    return pow_(ctx, x, legacy_operand(ctx, x, y))


#: The integer bases of Pow: those whose wrapped int32 powers narrow to the type's own.
POW_INTEGERS = (np.int8, np.uint8, np.int16, np.uint16, np.int32)


@GPU_KERNELS.register("Pow", since=7, dtypes=(*ALL_FLOATS, *POW_INTEGERS))
def pow_(ctx: GPUContext, x: Array, y: Array) -> Array:
    """``x ** y`` of the base's type. A float base takes the exponent cast to its type; an integer
    base with a float exponent is raised in float32 and truncated, with an integer exponent by
    repeated squaring."""
    if x.elem.is_float:
        return binary(ctx, "Pow", x, y if y.dtype == x.dtype else unary(ctx, "Cast", y, x.dtype))
    if y.elem.is_float:
        exponent = y if y.elem == f32 else unary(ctx, "Cast", y, np.dtype(np.float32))
        raised = binary(ctx, "Pow", unary(ctx, "Cast", x, np.dtype(np.float32)), exponent)
        return unary(ctx, "Cast", raised, x.dtype)
    shape = np.broadcast_shapes(x.shape, y.shape)
    out = ctx.backend.empty(shape, x.dtype)
    meta = ctx.backend.constant(
        [*shape, *broadcast_strides(x.shape, shape), *broadcast_strides(y.shape, shape)]
    )
    ctx.backend.launch_flat(integer_power.specialize(RANK=len(shape)), [x, y, out, meta], out.size)
    return out


def _variadic(ctx: GPUContext, op: str, xs: Sequence[Array]) -> Array:
    out = xs[0]
    for x in xs[1:]:
        out = binary(ctx, op, out, x)
    return out


_register_elementwise()


@GPU_KERNELS.register("Where", since=9)
def where(ctx: GPUContext, cond: Array, x: Array, y: Array) -> Array:
    shape = np.broadcast_shapes(cond.shape, x.shape, y.shape)
    out = ctx.backend.empty(shape, x.dtype)
    rows = [broadcast_strides(a.shape, shape) for a in (cond, x, y)]
    meta = ctx.backend.constant([*shape, *(s for row in rows for s in row)])
    ctx.backend.launch_flat(map3.specialize(T=x.elem, RANK=len(shape)), [cond, x, y, out, meta], out.size)
    return out


def _check_cast(node: Node, opset: int) -> str | None:
    target = from_onnx(int(node.attrs.get("to", 0)))
    return (
        None if target in PHYSICAL else f"casts to {target} (GPU tensors are {', '.join(map(str, PHYSICAL))})"
    )


@GPU_KERNELS.register("Cast", since=6, check=_check_cast)
def cast(ctx: GPUContext, x: Array) -> Array:
    return cast_to(ctx, x, from_onnx(int(ctx.attrs["to"])))


def cast_to(ctx: GPUContext, x: Array, target: np.dtype) -> Array:
    """``x`` as ``target``: to bool by comparing with 0, to a 16-bit float rounded to its precision,
    to an 8- or 4-bit float rounded and to a 2- to 16-bit integer wrapped as :mod:`.narrow` does
    (the node's ``saturate``, default 1, saying whether values past a float's range saturate)."""
    if np.dtype(target) in NARROWED:
        held = np.dtype(np.float32 if np.dtype(target) in NARROW_FLOATS else np.int32)
        x = x if x.elem in (f32, i32) else unary(ctx, "Cast", x, held)
        return narrowed(ctx, x, target, bool(ctx.attrs.get("saturate", 1)))
    if np.dtype(target) == ml_dtypes.bfloat16:
        out = ctx.backend.empty(x.shape, target)
        ctx.backend.launch_flat(round_to_bfloat16.specialize(T=x.elem), [x, out], out.size)
        return out
    op = {np.dtype(np.bool_): "CastBool", np.dtype(np.float16): "CastFloat16"}.get(np.dtype(target), "Cast")
    return unary(ctx, op, x, target)


# Data movement ----------------------------------------------------------------------------
def copy_strided(
    ctx: GPUContext,
    x: Array,
    out: Array,
    shape: Sequence[int],
    src: Sequence[int],
    dst: Sequence[int],
    src_offset: int = 0,
    dst_offset: int = 0,
) -> None:
    """Copy the view ``(shape, src strides, src_offset)`` of ``x`` to ``out`` at ``dst`` strides."""
    meta = ctx.backend.constant(np.array([*shape, *src, *dst], np.int64).astype(np.uint32))
    k = strided_copy.specialize(T=x.elem, RANK=len(shape))
    scalars = {"src_offset": src_offset % 2**32, "dst_offset": dst_offset}
    ctx.backend.launch_flat(k, [x, out, meta], math.prod(shape), **scalars)


def permuted(ctx: GPUContext, x: Array, perm: Sequence[int]) -> Array:
    shape = [x.shape[p] for p in perm]
    out = ctx.backend.empty(shape, x.dtype)
    strides = contiguous_strides(x.shape)
    copy_strided(ctx, x, out, shape, [strides[p] for p in perm], contiguous_strides(shape))
    return out


@GPU_KERNELS.register("Transpose")
def transpose(ctx: GPUContext, x: Array) -> Array:
    perm = ctx.attrs.get("perm") or list(range(len(x.shape)))[::-1]
    return permuted(ctx, x, [int(p) for p in perm])


@GPU_KERNELS.register("Expand", since=8)
def expand(ctx: GPUContext, x: Array, shape: Array) -> Array:
    target = np.broadcast_shapes(x.shape, tuple(int(d) for d in to_host(ctx, shape)))
    out = ctx.backend.empty(target, x.dtype)
    copy_strided(ctx, x, out, target, broadcast_strides(x.shape, target), contiguous_strides(target))
    return out


@GPU_KERNELS.register("Slice", until=10)
def slice_legacy(ctx: GPUContext, x: Array) -> Array:
    """Before opset 10 the bounds and axes are attributes, the steps all 1."""
    starts, ends = ctx.attrs["starts"], ctx.attrs["ends"]
    return sliced(ctx, x, starts, ends, ctx.attrs.get("axes") or range(len(starts)), [1] * len(starts))


@GPU_KERNELS.register("Slice", since=10)
def slice_(
    ctx: GPUContext,
    x: Array,
    starts: Array,
    ends: Array,
    axes: Array | None = None,
    steps: Array | None = None,
) -> Array:
    first, last = to_host(ctx, starts), to_host(ctx, ends)
    chosen = range(len(first)) if axes is None else to_host(ctx, axes)
    stride = [1] * len(first) if steps is None else to_host(ctx, steps)
    return sliced(ctx, x, first, last, chosen, stride)


def sliced(
    ctx: GPUContext,
    x: Array,
    starts: Ints,
    ends: Ints,
    axes: Ints,
    steps: Ints,
) -> Array:
    """``x`` cut to ``starts:ends:steps`` along ``axes`` (Python's slice rules), copied."""
    rank = len(x.shape)
    ranges = [range(dim) for dim in x.shape]
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        axis = axis_index(int(axis), rank)
        if step == 0:
            raise InvalidArgumentError("Slice steps must not be 0")
        ranges[axis] = ranges[axis][int(start) : int(end) : int(step)]
    shape = [len(r) for r in ranges]
    out = ctx.backend.empty(shape, x.dtype)
    base = contiguous_strides(x.shape)
    offset = sum(r.start * s for r, s in zip(ranges, base, strict=True) if len(r))
    copy_strided(
        ctx,
        x,
        out,
        shape,
        [r.step * s for r, s in zip(ranges, base, strict=True)],
        contiguous_strides(shape),
        offset,
    )
    return out


def index_along(ctx: GPUContext, x: Array, axis: int, index: int) -> Array:
    """``x[..., index, ...]`` along ``axis``, as a new tensor without that axis."""
    shape = [d for i, d in enumerate(x.shape) if i != axis]
    strides = contiguous_strides(x.shape)
    out = ctx.backend.empty(shape, x.dtype)
    if out.size:
        source = [s for i, s in enumerate(strides) if i != axis]
        copy_strided(ctx, x, out, shape, source, contiguous_strides(shape), src_offset=index * strides[axis])
    return out


@GPU_KERNELS.register("Concat", since=4)
def concat(ctx: GPUContext, *xs: Array) -> Array:
    return concatenate(ctx, xs, axis_index(int(ctx.attrs["axis"]), len(xs[0].shape)))


def concatenate(ctx: GPUContext, xs: Sequence[Array], axis: int) -> Array:
    """``xs`` joined along ``axis`` (in range)."""
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    out = ctx.backend.empty(shape, xs[0].dtype)
    strides, offset = contiguous_strides(shape), 0
    for x in xs:
        if x.size:
            copy_strided(
                ctx, x, out, x.shape, contiguous_strides(x.shape), strides, dst_offset=offset * strides[axis]
            )
        offset += x.shape[axis]
    return out


@GPU_KERNELS.register("Gather", since=1)
def gather_(ctx: GPUContext, data: Array, indices: Array) -> Array:
    return take(ctx, data, indices, axis_index(int(ctx.attrs.get("axis", 0)), len(data.shape)))


def take(ctx: GPUContext, data: Array, indices: Array, axis: int) -> Array:
    """The entries of ``data`` at ``indices`` (negative from the end) along ``axis`` (in range)."""
    shape = [*data.shape[:axis], *indices.shape, *data.shape[axis + 1 :]]
    out = ctx.backend.empty(shape, data.dtype)
    inner = math.prod(data.shape[axis + 1 :])
    scalars = {"inner": max(inner, 1), "count": max(indices.size, 1), "axis_dim": data.shape[axis]}
    ctx.backend.launch_flat(gather.specialize(T=data.elem), [data, indices, out], out.size, **scalars)
    return out


# Views ------------------------------------------------------------------------------------
@GPU_KERNELS.register("Reshape", since=5)
def reshape(ctx: GPUContext, x: Array, shape: Array) -> Array:
    wanted = [int(d) for d in to_host(ctx, shape)]
    if not ctx.attrs.get("allowzero", 0):
        wanted = [x.shape[i] if d == 0 else d for i, d in enumerate(wanted)]
    if -1 in wanted:
        known = math.prod(d for d in wanted if d != -1)
        wanted[wanted.index(-1)] = x.size // known if known else 0
    return x.view(tuple(wanted))


@GPU_KERNELS.register("Flatten", since=1)
def flatten(ctx: GPUContext, x: Array) -> Array:
    axis = int(ctx.attrs.get("axis", 1))
    axis = axis + len(x.shape) if axis < 0 else axis
    return x.view((math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


@GPU_KERNELS.register("Squeeze", since=1)
def squeeze(ctx: GPUContext, x: Array, axes: Array | None = None) -> Array:
    chosen = axes_argument(ctx, axes)
    drop = (
        {i for i, d in enumerate(x.shape) if d == 1}
        if chosen is None
        else {axis_index(a, len(x.shape)) for a in chosen}
    )
    return x.view(tuple(d for i, d in enumerate(x.shape) if i not in drop))


@GPU_KERNELS.register("Unsqueeze", since=1)
def unsqueeze(ctx: GPUContext, x: Array, axes: Array | None = None) -> Array:
    chosen = axes_argument(ctx, axes) or []
    rank = len(x.shape) + len(chosen)
    shape, rest = [], iter(x.shape)
    inserted = {axis_index(a, rank) for a in chosen}
    for i in range(rank):
        shape.append(1 if i in inserted else next(rest))
    return x.view(tuple(shape))


@GPU_KERNELS.register("Identity", since=1)
def identity(ctx: GPUContext, x: Array) -> Array:
    return x


@GPU_KERNELS.register("Shape", since=1)
def shape_(ctx: GPUContext, x: Array) -> Array:
    start, end = int(ctx.attrs.get("start", 0)), ctx.attrs.get("end")
    dims = x.shape[start : None if end is None else int(end)]
    return ctx.backend.from_numpy(np.array(dims, np.int64))


# Matrix multiplication and normalization -------------------------------------------------------
def _float(x: Array, op: str) -> None:
    if not x.elem.is_float:
        raise InvalidArgumentError(f"{op} on the GPU takes float tensors, not {x.dtype}")


@GPU_KERNELS.register("MatMul", since=1, dtypes=(*ALL_FLOATS, np.int32))
def matmul(ctx: GPUContext, a: Array, b: Array) -> Array:
    """Float or int32 products (int32 wrapping on overflow, as numpy's do)."""
    a2 = a.view((1, *a.shape)) if len(a.shape) == 1 else a
    b2 = b.view((*b.shape, 1)) if len(b.shape) == 1 else b
    (m, k), n = a2.shape[-2:], b2.shape[-1]
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    a3, b3 = _batched(ctx, a2, batch), _batched(ctx, b2, batch)
    count = math.prod(batch)
    out = ctx.backend.empty((*batch, m, n), a.dtype)
    if out.size:
        steps = {"a_step": m * k if a3.size > m * k else 0, "b_step": k * n if b3.size > k * n else 0}
        if a.elem != f32 or not ctx.backend.library_matmul(a3, b3, out, count, m, n, k, **steps):
            # CPU devices (lavapipe, PoCL) take the blocking without workgroup memory (see batched_matmul).
            blocking = DIRECT.fitted(m, n) if ctx.backend.runtime.on_cpu else TILED
            kernel, grid = batched_matmul(a.elem, blocking), blocking.grid(m, n, count)
            ctx.backend.launch(kernel, [a3, b3, out], grid, M=m, N=n, K=k, **steps)
    shape = [*batch, *([m] if len(a.shape) > 1 else []), *([n] if len(b.shape) > 1 else [])]
    return out.view(tuple(shape))


def _batched(ctx: GPUContext, x: Array, batch: tuple[int, ...]) -> Array:
    """``x`` as one matrix or one per batch item (expanded when partly broadcast)."""
    own = x.shape[:-2]
    if math.prod(own) == 1 or (1,) * (len(batch) - len(own)) + own == batch:
        return x
    target = (*batch, *x.shape[-2:])
    out = ctx.backend.empty(target, x.dtype)
    copy_strided(ctx, x, out, target, broadcast_strides(x.shape, target), contiguous_strides(target))
    return out


@GPU_KERNELS.register("Softmax", since=1, dtypes=ALL_FLOATS)
def softmax(ctx: GPUContext, x: Array) -> Array:
    _float(x, "Softmax")
    rank = len(x.shape)
    axis = axis_index(int(ctx.attrs.get("axis", -1 if ctx.opset >= 13 else 1)), rank)
    if ctx.opset >= 13:
        size, inner = x.shape[axis], math.prod(x.shape[axis + 1 :])
    else:
        size, inner = math.prod(x.shape[axis:]), 1
    out = ctx.backend.empty(x.shape, x.dtype)
    if size:
        k = softmax_rows.specialize(T=x.elem)
        ctx.backend.launch_flat(k, [x, out], x.size // size, D=size, inner=inner)
    return out


def _float_stash(node: Node, opset: int) -> str | None:
    code = node.attrs.get("stash_type", 1)
    return None if code == 1 else f"stash_type={code}: the GPU computes statistics in float32 only"


@GPU_KERNELS.register("LayerNormalization", since=17, check=_float_stash, dtypes=FLOATS)
def layer_norm(
    ctx: GPUContext, x: Array, scale: Array, bias: Array | None = None
) -> tuple[Array, Array, Array]:
    """Y, and the Mean and InvStdDev of each normalized row (in the input's rank, 1 along the axes)."""
    return normalize(ctx, x, scale, bias, centered=True)


@GPU_KERNELS.register("RMSNormalization", since=23, check=_float_stash, dtypes=FLOATS)
def rms_norm(ctx: GPUContext, x: Array, scale: Array) -> Array:
    return normalize(ctx, x, scale, None, centered=False)[0]


def normalize(
    ctx: GPUContext, x: Array, scale: Array, bias: Array | None, centered: bool
) -> tuple[Array, Array, Array]:
    """Layer (``centered``) or RMS normalization over the axes from ``axis`` on, with the statistics."""
    _float(x, "LayerNormalization" if centered else "RMSNormalization")
    axis = axis_index(int(ctx.attrs.get("axis", -1)), len(x.shape))
    size = math.prod(x.shape[axis:])
    params = [_sized(ctx, p, x.shape[axis:]) for p in (scale, bias)]
    out = ctx.backend.empty(x.shape, x.dtype)
    stats = (*x.shape[:axis], *[1] * (len(x.shape) - axis))
    mean, inv_std = ctx.backend.empty(stats, x.dtype), ctx.backend.empty(stats, x.dtype)
    if size:
        k = layernorm_rows.specialize(T=f32, CENTERED=centered)
        eps = float(ctx.attrs.get("epsilon", 1e-5))
        ctx.backend.launch_flat(k, [x, *params, out, mean, inv_std], x.size // size, D=size, epsilon=eps)
    return out, mean, inv_std


def _sized(ctx: GPUContext, p: Array | None, shape: tuple[int, ...]) -> Array:
    """A scale or bias as one value per normalized element (zeros when absent)."""
    if p is None:
        return ctx.backend.constant(np.zeros(math.prod(shape), np.float32), np.float32)
    if p.shape == shape or (p.size == math.prod(shape) and len(p.shape) <= len(shape)):
        return p
    out = ctx.backend.empty(shape, p.dtype)
    copy_strided(ctx, p, out, shape, broadcast_strides(p.shape, shape), contiguous_strides(shape))
    return out
