"""LSTM and GRU time steps as compiled loops, for the default activations (sigmoid and tanh).

A step of a small recurrence (a wake-word model's LSTM has 64 hidden units) is a few thousand
multiply-adds; as numpy calls it costs more in dispatch than in arithmetic, one call per gate
and activation. Here a direction runs whole in one call: the recurrent product, the gates and the
state updates of every step and row, in the compute type, states updated in place. The
recurrent products may reassociate their sums, so that they vectorize: the order is fixed by
the compiled code, so the same inputs still give the same bits.

The activations of each step run as loops over the gates of one kind, which LLVM vectorizes:
in float32 they are :mod:`.vector_math`'s branch-free sigmoid and tanh (a libm call per element
would cost more than the step's products), in float64 libm's. The loops are compiled with numpy's
error model, as a division check per element keeps a loop from vectorizing.
Gate orders are ONNX's: LSTM ``i, o, f, c`` (peepholes ``i, o, f``), GRU ``z, r, h``.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numba import types
from numba.extending import overload

from . import vector_math

Array = np.ndarray
_LOOP: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}


def _sigmoid(x: Any) -> Any:
    """The logistic function of one element, in its type (compiled code only)."""
    raise NotImplementedError


def _tanh(x: Any) -> Any:
    """tanh of one element, in its type (compiled code only)."""
    raise NotImplementedError


def _complement(x: Any) -> Any:
    """``1 - x`` in the type of ``x`` (a float literal would widen float32 to float64)."""
    raise NotImplementedError


@overload(_sigmoid)
def _sigmoid_of(x):  # untyped: numba compares its signature with the implementation's
    if x == types.float32:
        return lambda x: vector_math.sigmoid(x)
    return lambda x: 1.0 / (1.0 + math.exp(-x))


@overload(_tanh)
def _tanh_of(x):  # untyped: numba compares its signature with the implementation's
    if x == types.float32:
        return lambda x: vector_math.tanh(x)
    return lambda x: math.tanh(x)


@overload(_complement)
def _complement_of(x):  # untyped: numba compares its signature with the implementation's
    if x == types.float32:
        return lambda x: np.float32(1.0) - x
    return lambda x: 1.0 - x


@numba.njit(inline="always")
def _clipped(x: float, clip: float) -> float:
    return min(max(x, -clip), clip)


@numba.njit(**_LOOP, fastmath={"reassoc", "contract"})
def _recurrent_product(gates: Array, projected: Array, weights: Array, bias: Array, h: Array) -> None:
    """``gates = projected + bias + weights @ h`` for the rows of ``weights``."""
    for g in range(weights.shape[0]):
        total = projected[g] + bias[g]
        for k in range(h.shape[0]):
            total += weights[g, k] * h[k]
        gates[g] = total


@numba.njit(**_LOOP)
def lstm_scan(
    projected: Array,
    recurrence: Array,
    bias: Array,
    peepholes: Array,
    h: Array,
    c: Array,
    outputs: Array,
    reverse: bool,
    clip: float,
    input_forget: bool,
) -> None:
    """Every step of one LSTM direction; ``h``, ``c`` ``(B, H)`` hold the initial states and end
    holding the final ones, ``outputs`` ``(T, B, H)`` gets every step's hidden state.
    ``peepholes`` is ``(3 * H,)``, or empty for none; ``clip`` (in the compute type) is infinite
    for none."""
    steps, batch, rows = projected.shape
    hidden = rows // 4
    gates = np.empty(rows, projected.dtype)
    admit, out = gates[:hidden], gates[hidden : 2 * hidden]
    keep, cell = gates[2 * hidden : 3 * hidden], gates[3 * hidden :]
    peep = peepholes.shape[0] > 0
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        for b in range(batch):
            state = c[b]
            _recurrent_product(gates, projected[t, b], recurrence, bias, h[b])
            if peep:
                for j in range(hidden):
                    admit[j] += peepholes[j] * state[j]
                    keep[j] += peepholes[2 * hidden + j] * state[j]
            for j in range(hidden):
                admit[j] = _sigmoid(_clipped(admit[j], clip))
            if input_forget:
                for j in range(hidden):
                    keep[j] = _complement(admit[j])
            else:
                for j in range(hidden):
                    keep[j] = _sigmoid(_clipped(keep[j], clip))
            for j in range(hidden):
                state[j] = keep[j] * state[j] + admit[j] * _tanh(_clipped(cell[j], clip))
            if peep:
                for j in range(hidden):
                    out[j] += peepholes[hidden + j] * state[j]
            for j in range(hidden):
                h[b, j] = _sigmoid(_clipped(out[j], clip)) * _tanh(state[j])
            outputs[t, b] = h[b]


@numba.njit(**_LOOP)
def gru_scan(
    projected: Array,
    recurrence: Array,
    bias: Array,
    h: Array,
    outputs: Array,
    reverse: bool,
    clip: float,
    linear_before_reset: bool,
) -> None:
    """Every step of one GRU direction; ``h`` ``(B, H)`` holds the initial state and ends holding
    the final one, ``outputs`` ``(T, B, H)`` gets every step's; ``clip`` (in the compute type) is
    infinite for none."""
    steps, batch, rows = projected.shape
    hidden = rows // 3
    gated = 2 * hidden
    gates = np.empty(gated, projected.dtype)
    update, reset = gates[:hidden], gates[hidden:]
    mixed = np.empty(hidden, projected.dtype)  # the candidate's recurrent term
    scaled = np.empty(hidden, projected.dtype)  # reset * state, where the reset comes first
    nothing = np.zeros(hidden, projected.dtype)
    weight, candidate_bias = recurrence[gated:], bias[gated:]
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        for b in range(batch):
            state, step = h[b], projected[t, b]
            _recurrent_product(gates, step, recurrence[:gated], bias[:gated], state)
            for j in range(gated):
                gates[j] = _sigmoid(_clipped(gates[j], clip))
            if linear_before_reset:
                _recurrent_product(mixed, nothing, weight, candidate_bias, state)
                for j in range(hidden):
                    mixed[j] = reset[j] * mixed[j]
            else:
                for j in range(hidden):
                    scaled[j] = reset[j] * state[j]
                _recurrent_product(mixed, nothing, weight, candidate_bias, scaled)
            for j in range(hidden):
                candidate = _tanh(_clipped(step[gated + j] + mixed[j], clip))
                state[j] = _complement(update[j]) * candidate + update[j] * state[j]
            outputs[t, b] = state
