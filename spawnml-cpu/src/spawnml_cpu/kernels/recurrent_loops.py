"""LSTM and GRU time steps as compiled loops, for the default activations (sigmoid and tanh).

A step of a small recurrence (a wake-word model's LSTM has 64 hidden units) is a few thousand
multiply-adds; as numpy calls it costs more in dispatch than in arithmetic, one call per gate
and activation. Here a direction runs whole in one call: the recurrent product, the gates and the
state updates of every step and row, in the compute type, states updated in place. The
recurrent products may reassociate their sums, so that they vectorize: the order is fixed by
the compiled code, so the same inputs still give the same bits.
Gate orders are ONNX's: LSTM ``i, o, f, c`` (peepholes ``i, o, f``), GRU ``z, r, h``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

Array = np.ndarray


@numba.njit(cache=True, nogil=True, inline="always")
def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


@numba.njit(cache=True, nogil=True, inline="always")
def _clipped(x: float, clip: float) -> float:
    return min(max(x, -clip), clip)


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _recurrent_product(gates: Array, projected: Array, weights: Array, bias: Array, h: Array) -> None:
    """``gates = projected + bias + weights @ h`` for the rows of ``weights``."""
    for g in range(weights.shape[0]):
        total = projected[g] + bias[g]
        for k in range(h.shape[0]):
            total += weights[g, k] * h[k]
        gates[g] = total


@numba.njit(cache=True, nogil=True)
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
    ``peepholes`` is ``(3 * H,)``, or empty for none; ``clip`` is infinite for none."""
    steps, batch, rows = projected.shape
    hidden = rows // 4
    gates = np.empty(rows, projected.dtype)
    peep = peepholes.shape[0] > 0
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        for b in range(batch):
            _recurrent_product(gates, projected[t, b], recurrence, bias, h[b])
            for j in range(hidden):
                before = c[b, j]
                gate_in, gate_out = gates[j], gates[hidden + j]
                gate_forget, gate_cell = gates[2 * hidden + j], gates[3 * hidden + j]
                if peep:
                    gate_in += peepholes[j] * before
                    gate_forget += peepholes[2 * hidden + j] * before
                admit = _sigmoid(_clipped(gate_in, clip))
                keep = 1.0 - admit if input_forget else _sigmoid(_clipped(gate_forget, clip))
                cell = keep * before + admit * math.tanh(_clipped(gate_cell, clip))
                if peep:
                    gate_out += peepholes[hidden + j] * cell
                c[b, j] = cell
                h[b, j] = _sigmoid(_clipped(gate_out, clip)) * math.tanh(cell)
            outputs[t, b] = h[b]


@numba.njit(cache=True, nogil=True)
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
    the final one, ``outputs`` ``(T, B, H)`` gets every step's; ``clip`` is infinite for none."""
    steps, batch, rows = projected.shape
    hidden = rows // 3
    gated = 2 * hidden
    gates = np.empty(gated, projected.dtype)
    updated = np.empty(hidden, projected.dtype)
    candidate = np.empty(hidden, projected.dtype)
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        for b in range(batch):
            state = h[b]
            _recurrent_product(gates, projected[t, b], recurrence[:gated], bias[:gated], state)
            for j in range(gated):
                gates[j] = _sigmoid(_clipped(gates[j], clip))
            for j in range(hidden):
                total = 0.0
                if linear_before_reset:
                    for k in range(hidden):
                        total += recurrence[gated + j, k] * state[k]
                    total = gates[hidden + j] * (total + bias[gated + j])
                else:
                    for k in range(hidden):
                        total += recurrence[gated + j, k] * (gates[hidden + k] * state[k])
                    total += bias[gated + j]
                candidate[j] = math.tanh(_clipped(projected[t, b, gated + j] + total, clip))
            for j in range(hidden):
                updated[j] = (1.0 - gates[j]) * candidate[j] + gates[j] * state[j]
            h[b] = updated
            outputs[t, b] = updated
