"""Elementwise operators run as generated chains: unary math, activations, Mod, BitShift and
the bitwise operators, PRelu, Clip, IsNaN / IsInf, Sign, the variadic Sum / Mean, Swish and SwiGLU."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernel.library.chain import step
from ..kernel.library.remainder import float_mod
from .array import DeviceArray
from .fused import run_chain
from .shapes import broadcast_strides
from .table import ALL_FLOATS, FLOATS, GPU_KERNELS, GPUContext

BOOL = np.dtype(np.bool_)
INTEGERS = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64, np.uint32, np.uint64)
#: BitShift's types whose bits all live in the device's 32-bit integers.
SHIFTABLE = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32)

#: Float-only operators with their first opset; attributes come from the node.
FLOAT_UNARY = {
    "Sin": 7,
    "Cos": 7,
    "Tan": 7,
    "Asin": 7,
    "Acos": 7,
    "Atan": 7,
    "Sinh": 9,
    "Cosh": 9,
    "Asinh": 9,
    "Acosh": 9,
    "Atanh": 9,
    "Ceil": 6,
    "Floor": 6,
    "Round": 11,
    "Softplus": 1,
    "Softsign": 1,
    "Mish": 18,
    "HardSwish": 14,
    "HardSigmoid": 6,
    "LeakyRelu": 6,
    "Elu": 6,
    "Selu": 6,
    "Celu": 12,
    "ThresholdedRelu": 10,
    "Gelu": 20,
    "Shrink": 9,
}


def elementwise(
    ctx: GPUContext, op: str, inputs: list[DeviceArray], dtype: Any = None, **attrs: Any
) -> DeviceArray:
    """``op`` over ``inputs`` broadcast together, its result of ``dtype`` (the first input's)."""
    dtype = np.dtype(dtype or inputs[0].dtype)
    chain = (step(op, range(len(inputs)), dtype.name, {**ctx.attrs, **attrs}),)
    return run_chain(ctx, chain, inputs, f"{op.lower()}_elementwise")


def _register() -> None:
    for op, since in FLOAT_UNARY.items():
        GPU_KERNELS.register(op, since=since, dtypes=ALL_FLOATS)(
            lambda ctx, x, _op=op: elementwise(ctx, _op, [x])
        )
    for op, since in (("IsNaN", 9), ("IsInf", 10)):
        GPU_KERNELS.register(op, since=since, dtypes=ALL_FLOATS)(
            lambda ctx, x, _op=op: elementwise(ctx, _op, [x], BOOL)
        )
    GPU_KERNELS.register("PRelu", since=7, dtypes=FLOATS)(lambda ctx, x, s: elementwise(ctx, "PRelu", [x, s]))
    # Before opset 8 the inputs of Mean and Sum have one shape, which broadcasting keeps.
    GPU_KERNELS.register("Mean", dtypes=ALL_FLOATS)(lambda ctx, *xs: elementwise(ctx, "Mean", list(xs)))
    GPU_KERNELS.register("Sum")(lambda ctx, *xs: elementwise(ctx, "Sum", list(xs)))
    GPU_KERNELS.register("Sign", since=9)(lambda ctx, x: elementwise(ctx, "Sign", [x]))
    GPU_KERNELS.register("BitShift", since=11, dtypes=SHIFTABLE)(
        lambda ctx, x, y: elementwise(ctx, "BitShift", [x, y])
    )
    for op in ("And", "Or", "Xor"):  # on integers held as int32 the logical operators are bitwise
        GPU_KERNELS.register(f"Bitwise{op}", since=18, dtypes=SHIFTABLE)(
            lambda ctx, x, y, _op=op: elementwise(ctx, _op, [x, y])
        )


@GPU_KERNELS.register("Mod", since=10, dtypes=(*INTEGERS, *ALL_FLOATS))
def mod(ctx: GPUContext, x: DeviceArray, y: DeviceArray) -> DeviceArray:
    """Integers by the generated chain; floats by the exact long-division kernel (``a - b * trunc(a /
    b)`` would round)."""
    if not x.elem.is_float:
        return elementwise(ctx, "Mod", [x, y])
    shape = np.broadcast_shapes(x.shape, y.shape)
    out = ctx.backend.empty(shape, x.dtype)
    meta = ctx.backend.constant(
        [*shape, *broadcast_strides(x.shape, shape), *broadcast_strides(y.shape, shape)]
    )
    k = float_mod.specialize(
        T=x.elem,
        LARGEST=float(np.finfo(x.elem.numpy).max),
        RANK=len(shape),
        FMOD=bool(ctx.attrs.get("fmod", 0)),
    )
    ctx.backend.launch_flat(k, [x, y, out, meta], out.size)
    return out


@GPU_KERNELS.register("BitwiseNot", since=18, dtypes=SHIFTABLE)
def bitwise_not(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    """``x ^ ones``: all bits of the type set (-1, or its largest value when unsigned)."""
    ones = np.iinfo(x.dtype).max if np.issubdtype(x.dtype, np.unsignedinteger) else -1
    return elementwise(ctx, "Xor", [x, ctx.backend.from_numpy(np.array(ones, x.dtype))])


def _gated(ctx: GPUContext, x: DeviceArray, *factors: DeviceArray) -> DeviceArray:
    """``x * sigmoid(alpha * x)``, times each of ``factors``."""
    alpha = ctx.backend.from_numpy(np.array(ctx.attrs.get("alpha", 1.0), np.float32))
    inputs, name = [x, alpha, *factors], x.dtype.name
    steps = [step("Mul", [0, 1], name), step("Sigmoid", [len(inputs)], name)]
    steps.append(step("Mul", [0, len(inputs) + 1], name))
    for index in range(2, len(inputs)):
        steps.append(step("Mul", [len(inputs) + len(steps) - 1, index], name))
    return run_chain(ctx, tuple(steps), inputs, f"gated_{len(factors)}")


@GPU_KERNELS.register("Swish", since=24, dtypes=FLOATS)
def swish(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    return _gated(ctx, x)


@GPU_KERNELS.register("SwiGLU", since=28, dtypes=FLOATS)
def swiglu(ctx: GPUContext, a: DeviceArray, b: DeviceArray) -> DeviceArray:
    """``a * sigmoid(alpha * a) * b``."""
    return _gated(ctx, a, b)


@GPU_KERNELS.register("PRelu", until=7, dtypes=FLOATS)
def prelu_legacy(ctx: GPUContext, x: DeviceArray, slope: DeviceArray) -> DeviceArray:
    """Before opset 7 a 1-D slope as long as the channel axis is per channel, not broadcast."""
    if len(slope.shape) == 1 and len(x.shape) > 2 and slope.size == x.shape[1] != 1:
        slope = slope.view((slope.size, *[1] * (len(x.shape) - 2)))
    return elementwise(ctx, "PRelu", [x, slope])


@GPU_KERNELS.register("Clip", since=1)
def clip(
    ctx: GPUContext, x: DeviceArray, low: DeviceArray | None = None, high: DeviceArray | None = None
) -> DeviceArray:
    """Clip: bounds as inputs from opset 11, as ``min``/``max`` attributes before."""
    bounds = [b for b in (low, high) if b is not None]
    return elementwise(ctx, "Clip", [x, *bounds], has_min=low is not None, has_max=high is not None)


_register()
