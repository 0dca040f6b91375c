"""com.microsoft DynamicQuantizeLSTM: an LSTM whose weights are 8-bit integers and whose
inputs and hidden states are quantized to uint8 at run time, as ``quantize_dynamic`` writes it.

onnxruntime quantizes the operand of each of its products on its own, with DynamicQuantizeLinear's
rules: the whole input sequence once for the input projection, then at every step the hidden
states of the rows each thread takes (``ceil(batch / threads)`` rows, all of them where it does
not share the batch out). Here each row's hidden state is quantized on its own: the result does
not depend on a thread count, and it is onnxruntime's for one row, or whenever it has a thread
per row. The products are exact integers, scaled by ``a_scale *
w_scale`` (per column where the weights are per channel) in float32. The step adds the
recurrent product to the projection, then the sum of both biases, before the gates.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
from spawnml.backend import KernelContext
from spawnml.ir import Node
from spawnml.ops.defs.contrib import MS
from spawnml.ops.shapes import as_text

from .attention import sigmoid
from .integer_product import shifted_product
from .quant import dynamic_quantize
from .table import KERNELS

Array = np.ndarray
FLOAT32 = np.dtype(np.float32)
#: The largest magnitude of a uint8 value less a uint8 zero point.
UINT8_SPAN = 255


def quantized_product(
    a: Array, weights: Array, scale: Array, zero_point: Array, axis: int | None, origin: tuple[Array, int]
) -> Array:
    """``a @ dequantize(weights)`` as onnxruntime computes it: ``a`` (2-D) quantized dynamically
    (each row on its own with ``axis=1``), the integer product exact, then times ``a_scale *
    scale`` in float32. The weights' zero point is one value (onnxruntime reads the first);
    ``origin``: the weights of every direction and this one's index, that keep their forms."""
    quantized, a_scale, a_zero = dynamic_quantize(a, axis)
    values = quantized.astype(FLOAT32) - a_zero.astype(FLOAT32)
    zero = np.full(1, int(zero_point.reshape(-1)[0]), np.int32)
    exact = shifted_product(values, UINT8_SPAN, weights, zero, origin)
    return exact.astype(FLOAT32) * (a_scale * scale.astype(FLOAT32))


#: The activations DynamicQuantizeLSTM runs: LSTM's defaults, the only ones PyTorch and Keras
#: exports (and so the LSTMs quantize_dynamic rewrites) use.
ACTIVATIONS = ("sigmoid", "tanh", "tanh")
DIRECTIONS = ("forward", "reverse", "bidirectional")


def _check(node: Node, opset: int) -> str | None:
    direction = as_text(node.attrs.get("direction", "forward"))
    if direction not in DIRECTIONS:
        return f"direction={direction!r} is not one of {list(DIRECTIONS)}"
    names = [as_text(name).lower() for name in node.attrs.get("activations") or ()]
    if any(name != default for name, default in zip(names, itertools.cycle(ACTIVATIONS), strict=False)):
        return f"activations {names} are not LSTM's defaults (Sigmoid, Tanh, Tanh): not supported"
    return None


def _clipped(values: Array, clip: float | None) -> Array:
    return values if clip is None else np.clip(values, -clip, clip)


def _step(
    recurrence: tuple[Array, Array, Array, tuple[Array, int]],
    bias: Array,
    peepholes: Array | None,
    clip: float | None,
    input_forget: bool,
) -> Callable[[Array, Array, Array], tuple[Array, Array]]:
    """One LSTM step of all rows: the projected input plus the recurrent product, then the
    biases, through the gates (input, output, forget, cell)."""

    def step(projected: Array, h: Array, c: Array) -> tuple[Array, Array]:
        weights, scale, zero_point, origin = recurrence
        gates = (projected + quantized_product(h, weights, scale, zero_point, 1, origin)) + bias
        gate_in, gate_out, gate_forget, gate_cell = np.split(gates, 4, axis=-1)
        if peepholes is not None:
            peep_in, peep_out, peep_forget = np.split(peepholes, 3)
            gate_in, gate_forget = gate_in + peep_in * c, gate_forget + peep_forget * c
        input_gate = sigmoid(_clipped(gate_in, clip))
        forget = 1 - input_gate if input_forget else sigmoid(_clipped(gate_forget, clip))
        cell = c * forget + input_gate * np.tanh(_clipped(gate_cell, clip))
        if peepholes is not None:
            gate_out = gate_out + peep_out * cell
        return np.tanh(cell) * sigmoid(_clipped(gate_out, clip)), cell

    return step


def _run(
    step: Callable[[Array, Array, Array], tuple[Array, Array]],
    projected: Array,
    h: Array,
    c: Array,
    lengths: Array,
    reverse: bool,
) -> tuple[Array, Array, Array]:
    """Every step's hidden state (zero past a row's length) and the final states (zero for
    empty rows); a reverse direction starts at the last step of each row's own sequence."""
    steps = projected.shape[0]
    outputs = np.zeros((steps, *h.shape), FLOAT32)
    for t in range(steps - 1, -1, -1) if reverse else range(steps):
        new_h, new_c = step(projected[t], h, c)
        active = (t < lengths)[:, None]
        h, c = np.where(active, new_h, h), np.where(active, new_c, c)
        outputs[t] = np.where(active, h, 0)
    empty = (lengths == 0)[:, None]
    return outputs, np.where(empty, 0, h), np.where(empty, 0, c)


@KERNELS.register("DynamicQuantizeLSTM", domain=MS, check=_check)
def _dynamic_quantize_lstm(
    ctx: KernelContext,
    x: Array,
    w: Array,
    r: Array,
    b: Array | None,
    sequence_lens: Array | None,
    initial_h: Array | None,
    initial_c: Array | None,
    p: Array | None,
    w_scale: Array,
    w_zero_point: Array,
    r_scale: Array,
    r_zero_point: Array,
) -> tuple[Array, Array, Array]:
    """``Y [T, D, B, H]``, ``Y_h`` and ``Y_c [D, B, H]``; ``W [D, I, 4H]`` and ``R [D, H, 4H]``
    (transposed against LSTM's), their scales and zero points ``[D]`` or ``[D, 4H]``."""
    attrs = ctx.attrs
    steps, batch, inputs = x.shape
    hidden = r.shape[1]
    lengths = np.full(batch, steps) if sequence_lens is None else sequence_lens.astype(np.intp)
    results = []
    for index in range(w.shape[0]):
        projected = quantized_product(
            x.reshape(-1, inputs), w[index], w_scale[index], w_zero_point[index], None, (w, index)
        )
        bias = np.zeros(4 * hidden, FLOAT32) if b is None else b[index, : 4 * hidden] + b[index, 4 * hidden :]
        step = _step(
            (r[index], r_scale[index], r_zero_point[index], (r, index)),
            bias,
            None if p is None else p[index],
            attrs.get("clip"),
            bool(attrs["input_forget"]),
        )
        h, c = (np.zeros((batch, hidden), FLOAT32) if s is None else s[index] for s in (initial_h, initial_c))
        reverse = index == 1 or as_text(attrs["direction"]) == "reverse"
        results.append(_run(step, projected.reshape(steps, batch, -1), h, c, lengths, reverse))
    y, y_h, y_c = (
        np.stack(parts, axis=axis) for parts, axis in zip(zip(*results, strict=True), (1, 0, 0), strict=True)
    )
    return y, y_h, y_c
