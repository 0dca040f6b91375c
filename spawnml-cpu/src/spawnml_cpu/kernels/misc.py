"""CPU kernels of the miscellaneous operators: CumProd, Det, BitCast, Scatter, TensorScatter,
Shrink, LpNormalization, the random generators, CausalConvWithState and the training
optimizers.

Random generators draw from numpy's PCG64: with a ``seed`` attribute every run of a node
gives the same values, without one every run differs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from spawnml.backend import CheckFn, KernelContext
from spawnml.dtypes import from_onnx
from spawnml.errors import SpawnMLError
from spawnml.ir import Node
from spawnml.ops.defs.misc import OPTIMIZER_STATES, TRAINING_DOMAIN, optimizer_groups
from spawnml.ops.shapes import as_text, normalize_axis

from .checks import one_of, scalar
from .nn_common import compute_dtype, widen
from .table import KERNELS
from .tensor import scatter_elements
from .threads import blas_for

#: Bits of the element types narrower than a byte (numpy stores each in one byte).
_SUB_BYTE_BITS = {
    "int4": 4,
    "uint4": 4,
    "float4_e2m1fn": 4,
    "int2": 2,
    "uint2": 2,
}
_FLOATS = frozenset({"float16", "float32", "float64", "bfloat16"})


def _dtype_attr(attr: str, allowed: frozenset[str]) -> CheckFn:
    """A check refusing nodes whose type attribute ``attr`` is set to a type not ``allowed`` (by name)."""

    def check(node: Node, opset: int) -> str | None:
        if attr not in node.attrs:
            return None
        try:
            dtype = from_onnx(node.attrs[attr])
        except SpawnMLError as error:
            return str(error)
        return None if dtype.name in allowed else f"{attr} {dtype} is not one of {sorted(allowed)}"

    return check


# ---------------------------------------------------------------------------- math


@KERNELS.register("CumProd", since=26)
def cum_prod(ctx: KernelContext, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
    if np.asarray(axis).ndim != 0:
        raise ValueError(f"CumProd axis must be a scalar, got shape {np.shape(axis)}")
    chosen = normalize_axis(int(axis), x.ndim)
    data = np.flip(x, chosen) if ctx.attrs["reverse"] else x
    if ctx.attrs["exclusive"]:
        ones = np.ones((*data.shape[:chosen], 1, *data.shape[chosen + 1 :]), x.dtype)
        shifted = (slice(None),) * chosen + (slice(0, -1),)
        data = np.concatenate([ones, data], axis=chosen)[shifted]
    result = np.cumprod(widen(data), axis=chosen).astype(x.dtype)
    return np.flip(result, chosen).copy() if ctx.attrs["reverse"] else result


@KERNELS.register("Det", since=11)
def det(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    with blas_for(x.size * (x.shape[-1] if x.ndim else 1)):
        return np.asarray(np.linalg.det(widen(x))).astype(x.dtype)


@KERNELS.register("Shrink", since=9)
def shrink(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    bias, lambd = ctx.attrs["bias"], ctx.attrs["lambd"]
    work = x.astype(np.float64) if x.dtype.kind in "iu" else widen(x)
    shrunk = np.where(work < -lambd, work + bias, np.where(work > lambd, work - bias, 0))
    return shrunk.astype(x.dtype)


def _p_one_or_two(node: Node, opset: int) -> str | None:
    p = node.attrs.get("p", 2)
    return None if p in (1, 2) else f"p must be 1 or 2, got {p}"


@KERNELS.register("LpNormalization", since=1, check=_p_one_or_two)
def lp_normalization(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    work = widen(x)
    axis = normalize_axis(ctx.attrs["axis"], x.ndim)
    if ctx.attrs["p"] == 1:
        norm = np.abs(work).sum(axis=axis, keepdims=True)
    else:
        norm = np.sqrt((work * work).sum(axis=axis, keepdims=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norm == 0, 0, work / norm).astype(x.dtype)


# ---------------------------------------------------------------------------- bits and scatters


def _bits(dtype: np.dtype) -> int:
    return _SUB_BYTE_BITS.get(dtype.name, dtype.itemsize * 8)


def _bit_cast_target(node: Node, opset: int) -> str | None:
    try:
        target = from_onnx(node.attrs["to"])
    except SpawnMLError as error:
        return str(error)
    return "BitCast to string is not defined" if target.kind == "O" else None


@KERNELS.register("BitCast", since=26, check=_bit_cast_target)
def bit_cast(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    target = from_onnx(ctx.attrs["to"])
    if x.dtype.kind == "O" or _bits(x.dtype) != _bits(target):
        raise ValueError(f"BitCast cannot reinterpret {x.dtype} as {target}: their widths differ")
    return x.view(target)


KERNELS.register("Scatter", since=9, until=11)(scatter_elements)


_scatter_mode = one_of("mode", "linear", {"linear", "circular"})


def _tensor_scatter_check(node: Node, opset: int) -> str | None:
    if node.attrs.get("axis", -2) == 0:
        return "axis 0 is the batch axis and cannot be the sequence axis"
    return _scatter_mode(node, opset)


@KERNELS.register("TensorScatter", since=24, check=_tensor_scatter_check)
def tensor_scatter(
    ctx: KernelContext, past: np.ndarray, update: np.ndarray, write_indices: np.ndarray | None = None
) -> np.ndarray:
    axis = normalize_axis(ctx.attrs["axis"], past.ndim)
    if axis == 0:
        raise ValueError("axis 0 is the batch axis and cannot be the sequence axis")
    if update.shape[:axis] + update.shape[axis + 1 :] != past.shape[:axis] + past.shape[axis + 1 :]:
        raise ValueError(f"update of shape {update.shape} does not fit a cache of shape {past.shape}")
    capacity, steps = past.shape[axis], update.shape[axis]
    starts = np.zeros(past.shape[0], np.int64) if write_indices is None else write_indices.astype(np.int64)
    positions = starts[:, None] + np.arange(steps)
    if as_text(ctx.attrs["mode"]) == "circular":
        positions %= capacity
    elif steps and (positions.min() < 0 or positions.max() >= capacity):
        raise IndexError(f"writing {steps} steps at {starts.tolist()} overruns a cache of {capacity}")
    layout = [1] * past.ndim
    layout[0], layout[axis] = past.shape[0], steps
    present = past.copy()
    np.put_along_axis(present, positions.reshape(layout), update, axis=axis)
    return present


# ---------------------------------------------------------------------------- random generators


def _generator(ctx: KernelContext) -> np.random.Generator:
    """A generator seeded by the bits of the ``seed`` attribute, or from the OS without one."""
    seed = ctx.attrs.get("seed")
    return np.random.default_rng(None if seed is None else int(np.float32(seed).view(np.uint32)))


def _like_dtype(ctx: KernelContext, like: np.ndarray) -> np.dtype:
    """The type a ``*Like`` generator or Bernoulli draws: ``dtype`` when set, else the input's."""
    code = ctx.attrs.get("dtype")
    return like.dtype if code is None else from_onnx(code)


#: Draws of each continuous generator: ``(generator, attrs, shape) -> float64 samples``.
_DRAWS: dict[str, Callable[[np.random.Generator, dict, tuple[int, ...]], np.ndarray]] = {
    "RandomUniform": lambda rng, attrs, shape: rng.uniform(attrs["low"], attrs["high"], shape),
    "RandomNormal": lambda rng, attrs, shape: rng.normal(attrs["mean"], attrs["scale"], shape),
}

_float_dtype = _dtype_attr("dtype", _FLOATS)


def _random_check(node: Node, opset: int) -> str | None:
    if any(size < 0 for size in node.attrs.get("shape", ())):
        return f"shape {list(node.attrs['shape'])} has a negative dimension"
    return _float_dtype(node, opset)


def _register_random(name: str) -> None:
    draw = _DRAWS[name]

    def generate(ctx: KernelContext) -> np.ndarray:
        shape = tuple(int(size) for size in ctx.attrs["shape"])
        return draw(_generator(ctx), ctx.attrs, shape).astype(from_onnx(ctx.attrs["dtype"]))

    def generate_like(ctx: KernelContext, like: np.ndarray) -> np.ndarray:
        dtype = _like_dtype(ctx, like)
        if dtype.name not in _FLOATS:
            raise ValueError(f"{name}Like draws floating-point values, not {dtype}; set its dtype")
        return draw(_generator(ctx), ctx.attrs, like.shape).astype(dtype)

    KERNELS.register(name, since=1, check=_random_check)(generate)
    KERNELS.register(f"{name}Like", since=1, check=_float_dtype)(generate_like)


for _name in _DRAWS:
    _register_random(_name)


_BERNOULLI_TYPES = (
    frozenset({"uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "bool"}) | _FLOATS
)


@KERNELS.register("Bernoulli", since=15, check=_dtype_attr("dtype", _BERNOULLI_TYPES))
def bernoulli(ctx: KernelContext, p: np.ndarray) -> np.ndarray:
    drawn = _generator(ctx).random(p.shape) < p.astype(np.float64)
    return drawn.astype(_like_dtype(ctx, p))


_sample_dtype = _dtype_attr("dtype", frozenset({"int32", "int64"}))


def _multinomial_check(node: Node, opset: int) -> str | None:
    if node.attrs.get("sample_size", 1) < 0:
        return "sample_size must not be negative"
    return _sample_dtype(node, opset)


@KERNELS.register("Multinomial", since=7, check=_multinomial_check)
def multinomial(ctx: KernelContext, logits: np.ndarray) -> np.ndarray:
    """Draws ``sample_size`` classes per row of unnormalized log-probabilities."""
    if logits.ndim != 2:
        raise ValueError(f"Multinomial expects (batch, classes) log-probabilities, got {logits.shape}")
    work = logits.astype(np.float64)
    weights = np.exp(work - work.max(axis=1, keepdims=True))
    cumulative = np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)
    draws = _generator(ctx).random((logits.shape[0], ctx.attrs["sample_size"]))
    classes = (draws[..., None] >= cumulative[:, None, :]).sum(axis=-1)
    return np.minimum(classes, logits.shape[1] - 1).astype(from_onnx(ctx.attrs["dtype"]))


# ---------------------------------------------------------------------------- convolution with state


@KERNELS.register(
    "CausalConvWithState", since=27, check=one_of("activation", "none", {"none", "silu", "swish"})
)
def causal_conv_with_state(
    ctx: KernelContext,
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    past_state: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """A depthwise causal 1-D convolution over ``past_state`` followed by ``x``."""
    if x.ndim != 3 or weight.ndim != 3 or weight.shape[:2] != (x.shape[1], 1):
        raise ValueError(f"expects input (N, C, L) and weight (C, 1, k), got {x.shape} and {weight.shape}")
    batch, channels, length = x.shape
    kernel = weight.shape[2]
    if past_state is None:
        past_state = np.zeros((batch, channels, kernel - 1), x.dtype)
    padded = np.concatenate([past_state, x], axis=2)
    work = compute_dtype(x.dtype)
    windows = sliding_window_view(padded.astype(work, copy=False), kernel, axis=2)
    y = np.einsum("nclk,ck->ncl", windows, weight[:, 0].astype(work, copy=False))
    if bias is not None:
        y += bias.astype(work, copy=False)[:, None]
    if as_text(ctx.attrs["activation"]) != "none":
        y = y * (0.5 + 0.5 * np.tanh(0.5 * y))
    return y.astype(x.dtype), padded[:, :, length:].copy()


# ---------------------------------------------------------------------------- training optimizers


Array = np.ndarray


def _adagrad(attrs: dict, rate: float, step: int, x: Array, g: Array, h: Array) -> tuple[Array, ...]:
    rate = rate / (1 + step * attrs["decay_factor"])
    g = attrs["norm_coefficient"] * x + g
    h = h + g * g
    return x - rate * g / (np.sqrt(h) + attrs["epsilon"]), h


def _momentum(attrs: dict, rate: float, step: int, x: Array, g: Array, v: Array) -> tuple[Array, ...]:
    g = attrs["norm_coefficient"] * x + g
    v = attrs["alpha"] * v + (attrs["beta"] if step > 0 else 1) * g
    if as_text(attrs["mode"]) == "nesterov":
        return x - rate * (g + attrs["alpha"] * v), v
    return x - rate * v, v


def _adam(attrs: dict, rate: float, step: int, x: Array, g: Array, v: Array, h: Array) -> tuple[Array, ...]:
    alpha, beta = attrs["alpha"], attrs["beta"]
    g = attrs["norm_coefficient"] * x + g
    v = alpha * v + (1 - alpha) * g
    h = beta * h + (1 - beta) * g * g
    if step > 0:
        rate = rate * np.sqrt(1 - beta**step) / (1 - alpha**step)
    x = x - rate * v / (np.sqrt(h) + attrs["epsilon"])
    return (1 - attrs["norm_coefficient_post"]) * x, v, h


#: The update of one tensor: ``(attrs, rate, step, x, g, *states) -> (x, *states)``.
_UPDATES: dict[str, Callable[..., Any]] = {"Adagrad": _adagrad, "Momentum": _momentum, "Adam": _adam}


def _optimizer_kernel(name: str):
    update, states = _UPDATES[name], OPTIMIZER_STATES[name]

    def optimize(ctx: KernelContext, rate: np.ndarray, step: np.ndarray, *tensors: np.ndarray):
        count = optimizer_groups(name, 2 + len(tensors))
        if len(tensors) != count * (2 + states):
            raise ValueError(f"{name} takes X, G and {states} state tensor(s) per optimized tensor")
        groups = [tensors[i::count] for i in range(count)]
        r, t = float(np.asarray(rate).reshape(-1)[0]), scalar(step)
        results = [update(ctx.attrs, r, t, *(a.astype(np.float64) for a in group)) for group in groups]
        # Outputs: every updated X, then every first state, then every second state.
        return tuple(
            result[k].astype(group[0 if k == 0 else k + 1].dtype)
            for k in range(1 + states)
            for result, group in zip(results, groups, strict=True)
        )

    optimize.__name__ = optimize.__qualname__ = name.lower()
    return optimize


KERNELS.register("Adagrad", domain=TRAINING_DOMAIN)(_optimizer_kernel("Adagrad"))
KERNELS.register(
    "Momentum", domain=TRAINING_DOMAIN, check=one_of("mode", "standard", {"standard", "nesterov"})
)(_optimizer_kernel("Momentum"))
KERNELS.register("Adam", domain=TRAINING_DOMAIN)(_optimizer_kernel("Adam"))
