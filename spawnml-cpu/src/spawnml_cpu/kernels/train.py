"""The optimizers' fused updates (``ai.spawnml.train``), in the order and precision of torch.optim's
single-tensor implementations: the math runs in the parameter's type, the step-dependent
coefficients are computed in double precision on the host, as torch does."""

from __future__ import annotations

import math

import numpy as np
from spawnml.backend import KernelContext
from spawnml.ops.defs.train import DOMAIN

from .table import KERNELS

#: Element types the compiled updates take (numba has no float16 arithmetic).
_COMPILED = frozenset({np.dtype(np.float32), np.dtype(np.float64)})

Array = np.ndarray


def _direction(ctx: KernelContext, param: Array, grad: Array) -> Array:
    """The gradient, negated to maximize, with L2 weight decay added."""
    grad = -grad if ctx.attrs["maximize"] else grad
    decay = ctx.attrs["weight_decay"]
    return grad + param * param.dtype.type(decay) if decay else grad


def _scalar(x: Array, value: float) -> np.generic:
    return x.dtype.type(value)


@KERNELS.register("SGDStep", domain=DOMAIN)
def sgd_step(ctx: KernelContext, param: Array, grad: Array, buffer: Array | None = None) -> tuple[Array, ...]:
    a = ctx.attrs
    step = _direction(ctx, param, grad)
    momentum = a["momentum"]
    if not momentum:
        return (param - step * _scalar(param, a["lr"]),)
    if buffer is None:
        buffer = step.copy()
    else:
        buffer = buffer * _scalar(param, momentum) + step * _scalar(param, 1 - a["dampening"])
    step = step + buffer * _scalar(param, momentum) if a["nesterov"] else buffer
    return param - step * _scalar(param, a["lr"]), buffer


@KERNELS.register("AdamStep", domain=DOMAIN)
def adam_step(
    ctx: KernelContext,
    param: Array,
    grad: Array,
    exp_avg: Array,
    exp_avg_sq: Array,
    max_sq: Array | None = None,
) -> tuple[Array | None, ...]:
    a = ctx.attrs
    step = a["step"]
    step_size = a["lr"] / (1 - a["beta1"] ** step)
    correction2_sqrt = math.sqrt(1 - a["beta2"] ** step)
    if param.dtype in _COMPILED and grad.dtype == param.dtype:
        return _adam_compiled(a, param, grad, exp_avg, exp_avg_sq, max_sq, step_size, correction2_sqrt)
    grad = -grad if a["maximize"] else grad
    if a["weight_decay"]:
        if a["decoupled_weight_decay"]:
            param = param * _scalar(param, 1 - a["lr"] * a["weight_decay"])
        else:
            grad = grad + param * _scalar(param, a["weight_decay"])
    exp_avg = exp_avg + (grad - exp_avg) * _scalar(param, 1 - a["beta1"])
    exp_avg_sq = exp_avg_sq * _scalar(param, a["beta2"]) + grad * _scalar(param, 1 - a["beta2"]) * grad
    if max_sq is not None:
        max_sq = np.maximum(max_sq, exp_avg_sq)
    second = exp_avg_sq if max_sq is None else max_sq
    denom = np.sqrt(second) / _scalar(param, correction2_sqrt) + _scalar(param, a["eps"])
    return param - exp_avg / denom * _scalar(param, step_size), exp_avg, exp_avg_sq, max_sq


def _adam_compiled(
    a: dict,
    param: Array,
    grad: Array,
    exp_avg: Array,
    exp_avg_sq: Array,
    max_sq: Array | None,
    step_size: float,
    correction2_sqrt: float,
) -> tuple[Array | None, ...]:
    """:func:`adam_step` in one pass over the elements (:func:`.loops_train.adam`), with the
    same operations in the same order and type: the same results, but for the sign of a NaN."""
    from . import loops_train

    decay = a["weight_decay"]
    decoupled = bool(decay) and bool(a["decoupled_weight_decay"])
    mode = loops_train.DECOUPLED if decoupled else loops_train.L2 if decay else loops_train.NO_DECAY
    scalar = param.dtype.type
    new_param, new_avg, new_sq = (np.empty(param.shape, param.dtype) for _ in range(3))
    new_max = None if max_sq is None else np.empty(param.shape, param.dtype)
    inputs = (param, grad, exp_avg, exp_avg_sq, max_sq)
    loops_train.adam(
        *[None if x is None else np.ascontiguousarray(x).reshape(-1) for x in inputs],
        *[None if y is None else y.reshape(-1) for y in (new_param, new_avg, new_sq, new_max)],
        bool(a["maximize"]),
        mode,
        scalar(1 - a["lr"] * decay if decoupled else decay),
        scalar(1 - a["beta1"]),
        scalar(a["beta2"]),
        scalar(1 - a["beta2"]),
        scalar(correction2_sqrt),
        scalar(a["eps"]),
        scalar(step_size),
    )
    return new_param, new_avg, new_sq, new_max


@KERNELS.register("RMSpropStep", domain=DOMAIN)
def rmsprop_step(
    ctx: KernelContext,
    param: Array,
    grad: Array,
    square_avg: Array,
    buffer: Array | None = None,
    grad_avg: Array | None = None,
) -> tuple[Array | None, ...]:
    a = ctx.attrs
    grad = _direction(ctx, param, grad)
    alpha = a["alpha"]
    square_avg = square_avg * _scalar(param, alpha) + grad * _scalar(param, 1 - alpha) * grad
    if grad_avg is not None:
        grad_avg = grad_avg + (grad - grad_avg) * _scalar(param, 1 - alpha)
        avg = np.sqrt(square_avg - grad_avg * grad_avg)
    else:
        avg = np.sqrt(square_avg)
    avg = avg + _scalar(param, a["eps"])
    lr = _scalar(param, a["lr"])
    if buffer is not None:
        buffer = buffer * _scalar(param, a["momentum"]) + grad / avg
        return param - buffer * lr, square_avg, buffer, grad_avg
    return param - grad / avg * lr, square_avg, None, grad_avg
