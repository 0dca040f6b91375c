"""The optimizers' fused updates (``ai.spawnml.train``): one thread per element reads the
parameter, its gradient and state once and writes the new values, in the order of operations
of torch.optim's single-tensor implementations. Which state exists and the on/off options are
compile-time constants; the rates are scalars, so a schedule compiles nothing new."""

from __future__ import annotations

from ..frontend import kernel
from ..ir import f32, u32
from ..lang import Buffer, Const, ReadBuffer, global_id, sqrt


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
