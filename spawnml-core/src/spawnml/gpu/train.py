"""The optimizers' fused updates (``ai.spawnml.train``) on GPUs: one thread per element reads the
parameter, its gradient and state once and writes the new values, in the order of operations of
torch.optim's single-tensor implementations (as the CPU kernels do). Which state exists and the
on/off options are compile-time constants; the rates are scalars, so a schedule compiles nothing
new. An absent state buffer is bound to a stand-in its branch never touches."""

from __future__ import annotations

import math
from typing import Any

from ..backend import KernelContext
from ..kernel.frontend import kernel
from ..kernel.ir import f32, u32
from ..kernel.lang import Buffer, Const, ReadBuffer, global_id, sqrt
from ..ops.defs.train import DOMAIN
from .array import DeviceArray
from .table import FLOATS, GPU_KERNELS

Array = DeviceArray


@kernel(workgroup=(64,))
def sgd_step(
    param: ReadBuffer[f32],
    grad: ReadBuffer[f32],
    buf: ReadBuffer[f32],
    param_out: Buffer[f32],
    buf_out: Buffer[f32],
    n: u32,
    width: u32,
    lr: f32,
    weight_decay: f32,
    momentum: f32,
    keep: f32,
    MAXIMIZE: Const[bool],
    DECAY: Const[bool],
    MOMENTUM: Const[bool],
    FRESH: Const[bool],
    NESTEROV: Const[bool],
):
    """SGD; ``keep`` is ``1 - dampening``, ``FRESH`` starts the momentum buffer at the step."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        p = param[i]
        d = -grad[i] if MAXIMIZE else grad[i]
        if DECAY:
            d = d + p * weight_decay
        if MOMENTUM:
            b = d if FRESH else buf[i] * momentum + d * keep
            buf_out[i] = b
            d = d + b * momentum if NESTEROV else b
        param_out[i] = p - d * lr


@kernel(workgroup=(64,))
def adam_step(
    param: ReadBuffer[f32],
    grad: ReadBuffer[f32],
    exp_avg: ReadBuffer[f32],
    exp_avg_sq: ReadBuffer[f32],
    max_sq: ReadBuffer[f32],
    param_out: Buffer[f32],
    exp_avg_out: Buffer[f32],
    exp_avg_sq_out: Buffer[f32],
    max_sq_out: Buffer[f32],
    n: u32,
    width: u32,
    shrink: f32,
    weight_decay: f32,
    rest1: f32,
    beta2: f32,
    rest2: f32,
    step_size: f32,
    correction2_sqrt: f32,
    eps: f32,
    MAXIMIZE: Const[bool],
    DECAY: Const[bool],
    DECOUPLED: Const[bool],
    AMSGRAD: Const[bool],
):
    """Adam / AdamW; ``shrink`` is ``1 - lr * weight_decay``, ``rest1`` and ``rest2`` ``1 - beta``."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        p = param[i]
        g = -grad[i] if MAXIMIZE else grad[i]
        if DECAY:
            if DECOUPLED:
                p = p * shrink
            else:
                g = g + p * weight_decay
        m = exp_avg[i]
        m = m + (g - m) * rest1
        v = exp_avg_sq[i] * beta2 + g * rest2 * g
        exp_avg_out[i] = m
        exp_avg_sq_out[i] = v
        if AMSGRAD:
            v = max(max_sq[i], v)
            max_sq_out[i] = v
        denom = sqrt(v) / correction2_sqrt + eps
        param_out[i] = p - m / denom * step_size


@kernel(workgroup=(64,))
def rmsprop_step(
    param: ReadBuffer[f32],
    grad: ReadBuffer[f32],
    square_avg: ReadBuffer[f32],
    buf: ReadBuffer[f32],
    grad_avg: ReadBuffer[f32],
    param_out: Buffer[f32],
    square_avg_out: Buffer[f32],
    buf_out: Buffer[f32],
    grad_avg_out: Buffer[f32],
    n: u32,
    width: u32,
    lr: f32,
    alpha: f32,
    rest: f32,
    eps: f32,
    weight_decay: f32,
    momentum: f32,
    MAXIMIZE: Const[bool],
    DECAY: Const[bool],
    MOMENTUM: Const[bool],
    CENTERED: Const[bool],
):
    """RMSprop; ``rest`` is ``1 - alpha``."""
    i = global_id(1) * width + global_id(0)
    if i < n:
        p = param[i]
        g = -grad[i] if MAXIMIZE else grad[i]
        if DECAY:
            g = g + p * weight_decay
        s = square_avg[i] * alpha + g * rest * g
        square_avg_out[i] = s
        avg = sqrt(s)
        if CENTERED:
            a = grad_avg[i]
            a = a + (g - a) * rest
            grad_avg_out[i] = a
            avg = sqrt(s - a * a)
        avg = avg + eps
        if MOMENTUM:
            b = buf[i] * momentum + g / avg
            buf_out[i] = b
            param_out[i] = p - b * lr
        else:
            param_out[i] = p - g / avg * lr


def _outputs(ctx: KernelContext, like: Array, present: list[bool]) -> list[Array]:
    """A new array like ``like`` where ``present``, else a one-element stand-in."""
    return [ctx.backend.empty(like.shape if p else (1,), like.dtype) for p in present]


@GPU_KERNELS.register("SGDStep", domain=DOMAIN, dtypes=FLOATS)
def sgd(ctx: KernelContext, param: Array, grad: Array, buf: Array | None = None) -> tuple[Array, ...]:
    a = ctx.attrs
    momentum = bool(a["momentum"])
    out, buf_out = _outputs(ctx, param, [True, momentum])
    k = sgd_step.specialize(
        MAXIMIZE=bool(a["maximize"]),
        DECAY=bool(a["weight_decay"]),
        MOMENTUM=momentum,
        FRESH=buf is None,
        NESTEROV=bool(a["nesterov"]),
    )
    scalars = {"lr": a["lr"], "weight_decay": a["weight_decay"], "momentum": a["momentum"]}
    buffers = [param, grad, grad if buf is None else buf, out, buf_out]
    ctx.backend.launch_flat(k, buffers, param.size, keep=1 - a["dampening"], **scalars)
    return (out, buf_out) if momentum else (out,)


@GPU_KERNELS.register("AdamStep", domain=DOMAIN, dtypes=FLOATS)
def adam(
    ctx: KernelContext,
    param: Array,
    grad: Array,
    exp_avg: Array,
    exp_avg_sq: Array,
    max_sq: Array | None = None,
) -> tuple[Array | None, ...]:
    a = ctx.attrs
    amsgrad = max_sq is not None
    outputs = _outputs(ctx, param, [True, True, True, amsgrad])
    k = adam_step.specialize(
        MAXIMIZE=bool(a["maximize"]),
        DECAY=bool(a["weight_decay"]),
        DECOUPLED=bool(a["decoupled_weight_decay"]),
        AMSGRAD=amsgrad,
    )
    step = a["step"]
    scalars: dict[str, Any] = {
        "shrink": 1 - a["lr"] * a["weight_decay"],
        "weight_decay": a["weight_decay"],
        "rest1": 1 - a["beta1"],
        "beta2": a["beta2"],
        "rest2": 1 - a["beta2"],
        "step_size": a["lr"] / (1 - a["beta1"] ** step),
        "correction2_sqrt": math.sqrt(1 - a["beta2"] ** step),
        "eps": a["eps"],
    }
    buffers = [param, grad, exp_avg, exp_avg_sq, grad if max_sq is None else max_sq, *outputs]
    ctx.backend.launch_flat(k, buffers, param.size, **scalars)
    return (*outputs[:3], outputs[3] if amsgrad else None)


@GPU_KERNELS.register("RMSpropStep", domain=DOMAIN, dtypes=FLOATS)
def rmsprop(
    ctx: KernelContext,
    param: Array,
    grad: Array,
    square_avg: Array,
    buf: Array | None = None,
    grad_avg: Array | None = None,
) -> tuple[Array | None, ...]:
    a = ctx.attrs
    present = [True, True, buf is not None, grad_avg is not None]
    outputs = _outputs(ctx, param, present)
    k = rmsprop_step.specialize(
        MAXIMIZE=bool(a["maximize"]), DECAY=bool(a["weight_decay"]), MOMENTUM=present[2], CENTERED=present[3]
    )
    scalars = {
        "lr": a["lr"],
        "alpha": a["alpha"],
        "rest": 1 - a["alpha"],
        "eps": a["eps"],
        "weight_decay": a["weight_decay"],
        "momentum": a["momentum"],
    }
    buffers = [
        param,
        grad,
        square_avg,
        grad if buf is None else buf,
        grad if grad_avg is None else grad_avg,
        *outputs,
    ]
    ctx.backend.launch_flat(k, buffers, param.size, **scalars)
    return tuple(out if p else None for out, p in zip(outputs, present, strict=True))
