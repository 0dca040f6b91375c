"""Recurrent kernels: RNN, GRU and LSTM in every direction and layout, with sequence lengths.

Each direction projects the whole input sequence with one matrix product, then steps
through time. Rows whose sequence has ended keep their state and output zeros; a
reverse direction starts at the last step of each row's own sequence. 16-bit floats
are computed in float32. LSTM and GRU directions with the default activations and no row
ending early step in one compiled loop (:mod:`.recurrent_loops`); the others step in numpy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any, Protocol

import numpy as np
from spawnml.backend import CheckFn, KernelContext
from spawnml.errors import InvalidGraphError
from spawnml.ir import Node
from spawnml.ops.shapes import as_text

from .attention import sigmoid
from .nn_common import compute_dtype, matmul
from .table import KERNELS

Array = np.ndarray
Activation = Callable[[Array], Array]
DIRECTIONS = ("forward", "reverse", "bidirectional")


class _Parameterized(Protocol):
    """An activation function with its parameters, which :func:`_bind` gives by name."""

    def __call__(self, x: Array, a: float, b: float) -> Array: ...


#: Activation functions by lower-cased name: ``fn(x, alpha, beta)`` and the defaults of the
#: parameters it takes (alpha, then beta); a default of None must be given by the node.
_FUNCTIONS: dict[str, tuple[_Parameterized, tuple[float | None, ...]]] = {
    "relu": (lambda x, a, b: np.maximum(x, 0), ()),
    "tanh": (lambda x, a, b: np.tanh(x), ()),
    "sigmoid": (lambda x, a, b: sigmoid(x), ()),
    "affine": (lambda x, a, b: a * x + b, (1.0, 0.0)),
    "leakyrelu": (lambda x, a, b: np.where(x < 0, a * x, x), (0.01,)),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), (1.0,)),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), (None, None)),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), (0.2, 0.5)),
    "elu": (lambda x, a, b: np.where(x < 0, a * np.expm1(np.minimum(x, 0)), x), (1.0,)),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), ()),
    "softplus": (lambda x, a, b: np.logaddexp(0, x), ()),
}


def _bind(names: Sequence[str], alphas: Sequence[float], betas: Sequence[float]) -> list[Activation]:
    """The activation functions ``names`` with their parameters, consumed in order from
    ``alphas`` and ``betas`` by the functions that take them."""
    sources = (iter(alphas), iter(betas))
    bound: list[Activation] = []
    for name in names:
        key = as_text(name).lower()
        if key not in _FUNCTIONS:
            raise InvalidGraphError(f"unknown activation function {name!r}")
        fn, defaults = _FUNCTIONS[key]
        taken = [next(source, default) for source, default in zip(sources, defaults, strict=False)]
        params = [param for param in taken if param is not None]
        if len(params) != len(taken):
            raise InvalidGraphError(f"activation {name!r} needs activation_alpha and activation_beta")
        bound.append(partial(fn, a=params[0] if params else 0.0, b=params[1] if len(params) > 1 else 0.0))
    return bound


def _names(attrs: dict[str, Any], defaults: tuple[str, ...], directions: int) -> list[str]:
    """The activation names of every direction: the node's own, else the operator's defaults."""
    names = list(attrs.get("activations") or defaults * directions)
    if len(names) != len(defaults) * directions:
        raise InvalidGraphError(
            f"{len(names)} activations given where {directions} direction(s) need {len(defaults)} each"
        )
    return names


def _activations(node: Node, defaults: tuple[str, ...]) -> list[Activation]:
    directions = 2 if as_text(node.attrs.get("direction", "forward")) == "bidirectional" else 1
    return _bind(
        _names(node.attrs, defaults, directions),
        node.attrs.get("activation_alpha") or (),
        node.attrs.get("activation_beta") or (),
    )


def _checker(defaults: tuple[str, ...]) -> CheckFn:
    """A load-time check of the direction and activation attributes."""

    def check(node: Node, opset: int) -> str | None:
        direction = as_text(node.attrs.get("direction", "forward"))
        if direction not in DIRECTIONS:
            return f"direction={direction!r} is not one of {list(DIRECTIONS)}"
        try:
            _activations(node, defaults)
        except InvalidGraphError as error:
            return str(error)
        return None

    return check


@dataclass(frozen=True)
class Direction:
    """The weights and functions of one direction, in the compute type.

    ``recurrence`` is ``(gates * hidden, hidden)``; ``peepholes`` is LSTM's ``(3 * hidden,)``,
    None where the node has none; ``bound`` is the clip (infinite for none).
    """

    recurrence: Array
    recurrence_bias: Array
    peepholes: Array | None
    activations: list[Activation]
    bound: float

    def clip(self, x: Array) -> Array:
        return x if math.isinf(self.bound) else np.clip(x, -self.bound, self.bound)


#: ``step(direction, projected input of one step, states) -> new states``, hidden state first.
Step = Callable[[Direction, Array, tuple[Array, ...]], tuple[Array, ...]]


def _gates(values: Array, count: int) -> Array:
    """``(B, count * H)`` gate values as ``(count, B, H)``, to unpack one view per gate."""
    return values.reshape(len(values), count, -1).swapaxes(0, 1)


def _rnn_step(d: Direction, projected: Array, states: tuple[Array, ...]) -> tuple[Array, ...]:
    (h,) = states
    (f,) = d.activations
    return (f(d.clip(projected + h @ d.recurrence.T + d.recurrence_bias)),)


def _gru_step(
    d: Direction, projected: Array, states: tuple[Array, ...], linear_before_reset: bool
) -> tuple[Array, ...]:
    (h,) = states
    f, g = d.activations
    gated = 2 * h.shape[-1]  # update and reset gates come first, the candidate last
    mixed = projected[:, :gated] + h @ d.recurrence[:gated].T + d.recurrence_bias[:gated]
    update, reset = _gates(f(d.clip(mixed)), 2)
    weight, bias = d.recurrence[gated:], d.recurrence_bias[gated:]
    if linear_before_reset:
        candidate = projected[:, gated:] + reset * (h @ weight.T + bias)
    else:
        candidate = projected[:, gated:] + (reset * h) @ weight.T + bias
    return ((1 - update) * g(d.clip(candidate)) + update * h,)


def _lstm_step(
    d: Direction, projected: Array, states: tuple[Array, ...], input_forget: bool
) -> tuple[Array, ...]:
    h, c = states
    f, g, out = d.activations
    gate_in, gate_out, gate_forget, gate_cell = _gates(projected + h @ d.recurrence.T + d.recurrence_bias, 4)
    if d.peepholes is not None:
        peep_in, peep_out, peep_forget = d.peepholes.reshape(3, -1)
        gate_in, gate_forget = gate_in + peep_in * c, gate_forget + peep_forget * c
    input_gate = f(d.clip(gate_in))
    forget = 1 - input_gate if input_forget else f(d.clip(gate_forget))
    cell = forget * c + input_gate * g(d.clip(gate_cell))
    if d.peepholes is not None:
        gate_out = gate_out + peep_out * cell
    return f(d.clip(gate_out)) * out(cell), cell


#: ``loop(direction, projected, states, reverse) -> (outputs, final states)``: a whole direction.
Loop = Callable[[Direction, Array, tuple[Array, ...], bool], tuple[Array, tuple[Array, ...]]]


@functools.cache
def _loops() -> ModuleType:
    """The compiled loops, imported on first use (numba takes a while to import)."""
    from . import recurrent_loops

    return recurrent_loops


def _lstm_loop(
    d: Direction, projected: Array, states: tuple[Array, ...], reverse: bool, input_forget: bool
) -> tuple[Array, tuple[Array, ...]]:
    h, c = (np.array(state, projected.dtype, order="C") for state in states)
    outputs = np.empty((projected.shape[0], *h.shape), projected.dtype)
    peepholes = np.empty(0, projected.dtype) if d.peepholes is None else d.peepholes
    bound = projected.dtype.type(d.bound)
    _loops().lstm_scan(
        projected, d.recurrence, d.recurrence_bias, peepholes, h, c, outputs, reverse, bound, input_forget
    )
    return outputs, (h, c)


def _gru_loop(
    d: Direction, projected: Array, states: tuple[Array, ...], reverse: bool, linear_before_reset: bool
) -> tuple[Array, tuple[Array, ...]]:
    h = np.array(states[0], projected.dtype, order="C")
    outputs = np.empty((projected.shape[0], *h.shape), projected.dtype)
    bound = projected.dtype.type(d.bound)
    _loops().gru_scan(
        projected, d.recurrence, d.recurrence_bias, h, outputs, reverse, bound, linear_before_reset
    )
    return outputs, (h,)


def _scan(
    step: Callable[[Array, tuple[Array, ...]], tuple[Array, ...]],
    projected: Array,
    states: tuple[Array, ...],
    lengths: Array,
    reverse: bool,
) -> tuple[Array, tuple[Array, ...]]:
    """Step through ``projected`` ``(T, B, G*H)``: the hidden state of every step (zero past
    a row's length) and the final states (zero for empty rows)."""
    steps = projected.shape[0]
    outputs = np.zeros((steps, *states[0].shape), states[0].dtype)
    if steps and (lengths == steps).all():  # no row ends early: nothing to mask
        for t in range(steps - 1, -1, -1) if reverse else range(steps):
            states = step(projected[t], states)
            outputs[t] = states[0]
        return outputs, states
    for t in range(steps - 1, -1, -1) if reverse else range(steps):
        active = (t < lengths)[:, None]
        states = tuple(
            np.where(active, new, old) for new, old in zip(step(projected[t], states), states, strict=True)
        )
        outputs[t] = np.where(active, states[0], 0)
    empty = (lengths == 0)[:, None]
    return outputs, tuple(np.where(empty, 0, state) for state in states)


def _direction(
    index: int,
    r: Array,
    b: Array | None,
    peepholes: Array | None,
    activations: list[Activation],
    clip: float | None,
    work: np.dtype,
) -> Direction:
    """The recurrence weights, biases, peepholes and activations of direction ``index``."""
    rows = r.shape[1]
    per_direction = len(activations) // r.shape[0]
    return Direction(
        np.ascontiguousarray(r[index], work),
        np.zeros(rows, work) if b is None else np.ascontiguousarray(b[index, rows:], work),
        None if peepholes is None else np.ascontiguousarray(peepholes[index], work),
        activations[index * per_direction : (index + 1) * per_direction],
        math.inf if clip is None else float(clip),
    )


def _default_activations(node: Node, defaults: tuple[str, ...]) -> bool:
    """Whether every direction of ``node`` uses the operator's default activation functions."""
    names = [as_text(name).lower() for name in node.attrs.get("activations") or ()]
    expected = [name.lower() for name in defaults]
    return names == expected * (len(names) // len(expected))


def _projection(x: Array, w: Array, b: Array | None, index: int, work: np.dtype) -> Array:
    """``X @ W^T + Wb`` of direction ``index`` for every step at once, ``(T, B, gates * hidden)``."""
    projected = matmul(x.astype(work, copy=False), w[index].astype(work, copy=False).T)
    if b is not None:
        projected += b[index, : w.shape[1]].astype(work, copy=False)
    return projected


def _recurrent(
    ctx: KernelContext,
    step: Step,
    defaults: tuple[str, ...],
    x: Array,
    w: Array,
    r: Array,
    b: Array | None,
    sequence_lens: Array | None,
    initial: Sequence[Array | None],
    peepholes: Array | None = None,
    loop: Loop | None = None,
) -> tuple[Array, ...]:
    """``Y`` and the final states of a recurrent node; ``initial`` holds its initial states.
    ``loop`` runs a whole direction compiled, where the activations are ``defaults`` and no row
    ends early."""
    attrs, dtype = ctx.attrs, x.dtype
    work = compute_dtype(dtype)
    batchwise = bool(attrs.get("layout", 0))
    if batchwise:
        x = x.swapaxes(0, 1)
        initial = [None if s is None else s.swapaxes(0, 1) for s in initial]
    steps, batch, _ = x.shape
    lengths = np.full(batch, steps) if sequence_lens is None else sequence_lens.astype(np.intp)
    activations = _activations(ctx.node, defaults)
    full = steps > 0 and bool((lengths == steps).all())
    if not (full and _default_activations(ctx.node, defaults)):
        loop = None
    ys, finals = [], []
    for index in range(w.shape[0]):
        direction = _direction(index, r, b, peepholes, activations, attrs.get("clip"), work)
        states = tuple(
            np.zeros((batch, r.shape[-1]), work) if s is None else s[index].astype(work, copy=False)
            for s in initial
        )
        reverse = index == 1 or as_text(attrs["direction"]) == "reverse"
        projected = _projection(x, w, b, index, work)
        if loop is not None:
            y, final = loop(direction, projected, states, reverse)
        else:
            y, final = _scan(partial(step, direction), projected, states, lengths, reverse)
        ys.append(y)
        finals.append(final)
    y = np.stack(ys, axis=1)
    stacked = [np.stack(state) for state in zip(*finals, strict=True)]
    if batchwise:
        y, stacked = y.transpose(2, 0, 1, 3), [state.swapaxes(0, 1) for state in stacked]
    return tuple(array.astype(dtype, copy=False) for array in (y, *stacked))


_RNN_DEFAULTS = ("Tanh",)
_GRU_DEFAULTS = ("Sigmoid", "Tanh")
_LSTM_DEFAULTS = ("Sigmoid", "Tanh", "Tanh")


@KERNELS.register("RNN", check=_checker(_RNN_DEFAULTS))
def _rnn(
    ctx: KernelContext,
    x: Array,
    w: Array,
    r: Array,
    b: Array | None = None,
    sequence_lens: Array | None = None,
    initial_h: Array | None = None,
) -> tuple[Array, ...]:
    return _recurrent(ctx, _rnn_step, _RNN_DEFAULTS, x, w, r, b, sequence_lens, [initial_h])


@KERNELS.register("GRU", check=_checker(_GRU_DEFAULTS))
def _gru(
    ctx: KernelContext,
    x: Array,
    w: Array,
    r: Array,
    b: Array | None = None,
    sequence_lens: Array | None = None,
    initial_h: Array | None = None,
) -> tuple[Array, ...]:
    linear_before_reset = bool(ctx.attrs.get("linear_before_reset", 0))
    step = partial(_gru_step, linear_before_reset=linear_before_reset)
    loop = partial(_gru_loop, linear_before_reset=linear_before_reset)
    return _recurrent(ctx, step, _GRU_DEFAULTS, x, w, r, b, sequence_lens, [initial_h], loop=loop)


@KERNELS.register("LSTM", check=_checker(_LSTM_DEFAULTS))
def _lstm(
    ctx: KernelContext,
    x: Array,
    w: Array,
    r: Array,
    b: Array | None = None,
    sequence_lens: Array | None = None,
    initial_h: Array | None = None,
    initial_c: Array | None = None,
    p: Array | None = None,
) -> tuple[Array, ...]:
    input_forget = bool(ctx.attrs["input_forget"])
    step = partial(_lstm_step, input_forget=input_forget)
    loop = partial(_lstm_loop, input_forget=input_forget)
    return _recurrent(
        ctx, step, _LSTM_DEFAULTS, x, w, r, b, sequence_lens, [initial_h, initial_c], p, loop=loop
    )
