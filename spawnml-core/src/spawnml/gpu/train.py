"""The optimizers' fused updates (``ai.spawnml.train``) on GPUs, and ONNX's preview training
optimizers (``ai.onnx.preview.training`` Adagrad, Momentum, Adam) as generated chains.

For the fused updates one thread per element reads the parameter, its gradient and state once
and writes the new values, in the order of operations of torch.optim's single-tensor
implementations (as the CPU kernels do). Which state exists and the on/off options are
compile-time constants; the rates are scalars, so a schedule compiles nothing new. An absent
state buffer is bound to a stand-in its branch never touches."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.library.optim import adam_step, rmsprop_step, sgd_step
from ..ops.defs.misc import OPTIMIZER_STATES, TRAINING_DOMAIN, optimizer_groups
from ..ops.defs.train import DOMAIN
from ..ops.shapes import as_text
from .array import DeviceArray
from .fused import ChainBuilder, ChainValue, scalar
from .host import to_host
from .table import FLOATS, GPU_KERNELS, GPUContext

Array = DeviceArray


def _outputs(ctx: GPUContext, like: Array, present: list[bool]) -> list[Array]:
    """A new array like ``like`` where ``present``, else a one-element stand-in."""
    return [ctx.backend.empty(like.shape if p else (1,), like.dtype) for p in present]


@GPU_KERNELS.register("SGDStep", domain=DOMAIN, dtypes=FLOATS)
def sgd(ctx: GPUContext, param: Array, grad: Array, buf: Array | None = None) -> tuple[Array, ...]:
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
    ctx: GPUContext,
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
    ctx: GPUContext,
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


# ONNX's preview training optimizers (ai.onnx.preview.training): Adagrad, Momentum and Adam over
# groups of (X, G, states...), each new tensor one generated chain; the rate and step are read
# on the host, and the rate's decay or bias correction folded into one scalar.


def _decayed_gradient(ctx: GPUContext, chain: ChainBuilder, x: ChainValue, g: DeviceArray) -> ChainValue:
    """``norm_coefficient * x + g``."""
    scaled = chain.add("Mul", chain.input(scalar(ctx, ctx.attrs.get("norm_coefficient", 0.0))), x)
    return chain.add("Add", scaled, chain.input(g))


def _adagrad(ctx: GPUContext, rate: float, step: int, x: Array, g: Array, h: Array) -> tuple[Array, ...]:
    rate = rate / (1 + step * ctx.attrs.get("decay_factor", 0.0))
    chain = ChainBuilder()
    gradient = _decayed_gradient(ctx, chain, chain.input(x), g)
    chain.add("Add", chain.input(h), chain.add("Mul", gradient, gradient))
    new_h = chain.run(ctx, h.dtype, "adagrad_state")
    chain = ChainBuilder()
    x_ref = chain.input(x)
    gradient = _decayed_gradient(ctx, chain, x_ref, g)
    root = chain.add(
        "Add", chain.add("Sqrt", chain.input(new_h)), chain.input(scalar(ctx, ctx.attrs.get("epsilon", 0.0)))
    )
    move = chain.add("Div", chain.add("Mul", chain.input(scalar(ctx, rate)), gradient), root)
    chain.add("Sub", x_ref, move)
    return chain.run(ctx, x.dtype, "adagrad_update"), new_h


def _momentum(ctx: GPUContext, rate: float, step: int, x: Array, g: Array, v: Array) -> tuple[Array, ...]:
    alpha, beta = ctx.attrs.get("alpha", 0.0), ctx.attrs.get("beta", 0.0) if step > 0 else 1.0
    chain = ChainBuilder()
    gradient = _decayed_gradient(ctx, chain, chain.input(x), g)
    kept = chain.add("Mul", chain.input(scalar(ctx, alpha)), chain.input(v))
    chain.add("Add", kept, chain.add("Mul", chain.input(scalar(ctx, beta)), gradient))
    new_v = chain.run(ctx, v.dtype, "momentum_state")
    chain = ChainBuilder()
    x_ref, v_ref = chain.input(x), chain.input(new_v)
    direction = v_ref
    if as_text(ctx.attrs.get("mode", "standard")) == "nesterov":
        gradient = _decayed_gradient(ctx, chain, x_ref, g)
        direction = chain.add("Add", gradient, chain.add("Mul", chain.input(scalar(ctx, alpha)), v_ref))
    chain.add("Sub", x_ref, chain.add("Mul", chain.input(scalar(ctx, rate)), direction))
    return chain.run(ctx, x.dtype, "momentum_update"), new_v


def _adam(
    ctx: GPUContext, rate: float, step: int, x: Array, g: Array, v: Array, h: Array
) -> tuple[Array, ...]:
    alpha, beta = ctx.attrs.get("alpha", 0.9), ctx.attrs.get("beta", 0.999)
    states = []
    for state, keep, squared in ((v, alpha, False), (h, beta, True)):
        chain = ChainBuilder()
        gradient = _decayed_gradient(ctx, chain, chain.input(x), g)
        term = chain.add("Mul", gradient, gradient) if squared else gradient
        kept = chain.add("Mul", chain.input(scalar(ctx, keep)), chain.input(state))
        chain.add("Add", kept, chain.add("Mul", chain.input(scalar(ctx, 1 - keep)), term))
        states.append(chain.run(ctx, state.dtype, "adam_state"))
    if step > 0:
        rate = rate * math.sqrt(1 - beta**step) / (1 - alpha**step)
    chain = ChainBuilder()
    x_ref = chain.input(x)
    root = chain.add(
        "Add",
        chain.add("Sqrt", chain.input(states[1])),
        chain.input(scalar(ctx, ctx.attrs.get("epsilon", 0.0))),
    )
    move = chain.add("Div", chain.add("Mul", chain.input(scalar(ctx, rate)), chain.input(states[0])), root)
    kept = chain.input(scalar(ctx, 1 - ctx.attrs.get("norm_coefficient_post", 0.0)))
    chain.add("Mul", kept, chain.add("Sub", x_ref, move))
    return chain.run(ctx, x.dtype, "adam_update"), *states


_PREVIEW_UPDATES: dict[str, Callable[..., tuple[Array, ...]]] = {
    "Adagrad": _adagrad,
    "Momentum": _momentum,
    "Adam": _adam,
}


def _check_momentum(node: Node, opset: int) -> str | None:
    mode = as_text(node.attrs.get("mode", "standard"))
    return None if mode in ("standard", "nesterov") else f"mode={mode!r} is not standard or nesterov"


def _preview_optimizer(name: str) -> Any:
    update, states = _PREVIEW_UPDATES[name], OPTIMIZER_STATES[name]

    def optimize(ctx: GPUContext, rate: Array, step: Array, *tensors: Array) -> tuple[Array, ...]:
        count = optimizer_groups(name, 2 + len(tensors))
        if len(tensors) != count * (2 + states):
            raise InvalidArgumentError(f"{name} takes X, G and {states} state tensor(s) per optimized tensor")
        r, t = float(to_host(ctx, rate).reshape(-1)[0]), int(to_host(ctx, step).reshape(-1)[0])
        results = [update(ctx, r, t, *tensors[i::count]) for i in range(count)]
        # Outputs: every updated X, then every first state, then every second state.
        return tuple(result[k] for k in range(1 + states) for result in results)

    optimize.__name__ = optimize.__qualname__ = name.lower()
    return optimize


GPU_KERNELS.register("Adagrad", domain=TRAINING_DOMAIN, dtypes=FLOATS)(_preview_optimizer("Adagrad"))
GPU_KERNELS.register("Momentum", domain=TRAINING_DOMAIN, check=_check_momentum, dtypes=FLOATS)(
    _preview_optimizer("Momentum")
)
GPU_KERNELS.register("Adam", domain=TRAINING_DOMAIN, dtypes=FLOATS)(_preview_optimizer("Adam"))
