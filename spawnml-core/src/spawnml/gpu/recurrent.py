"""RNN, GRU and LSTM on the GPU, composed from the shared kernels, in every direction and layout.

Each gate of a direction projects the whole input sequence with one matrix product; then each
step multiplies the hidden state by the gate's recurrence (one product per gate) and combines
them in one generated elementwise chain per new state. Rows whose sequence has ended keep their
state and output zeros; a reverse direction starts at the last step of each row's own sequence.
The activations are those without parameters of their own (``activation_alpha`` / ``_beta``
are refused at load).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..backend import CheckFn
from ..ir import Node
from ..kernel.library.chain import step
from ..ops.shapes import as_text
from .array import DeviceArray
from .fused import ChainBuilder, ChainValue, run_chain, scalar
from .host import to_host
from .shapes import contiguous_strides
from .table import FLOATS, GPU_KERNELS, GPUContext, concatenate, copy_strided, index_along, matmul, permuted

DIRECTIONS = ("forward", "reverse", "bidirectional")
#: The activation functions a recurrent node may name, as the elementwise operators computing them.
ACTIVATIONS = {
    "tanh": "Tanh",
    "sigmoid": "Sigmoid",
    "relu": "Relu",
    "softsign": "Softsign",
    "softplus": "Softplus",
    "hardsigmoid": "HardSigmoid",
    "leakyrelu": "LeakyRelu",
    "elu": "Elu",
    "thresholdedrelu": "ThresholdedRelu",
}
DEFAULTS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _activations(node: Node) -> list[str]:
    directions = 2 if as_text(node.attrs.get("direction", "forward")) == "bidirectional" else 1
    names = [as_text(n) for n in node.attrs.get("activations") or DEFAULTS[node.op_type] * directions]
    return [ACTIVATIONS.get(n.lower(), n) for n in names]


def _checker(op: str) -> CheckFn:
    def check(node: Node, opset: int) -> str | None:
        direction = as_text(node.attrs.get("direction", "forward"))
        if direction not in DIRECTIONS:
            return f"direction={direction!r} is not one of {list(DIRECTIONS)}"
        if node.attrs.get("activation_alpha") or node.attrs.get("activation_beta"):
            return "activation_alpha and activation_beta are not run on the GPU"
        names = _activations(node)
        directions = 2 if direction == "bidirectional" else 1
        if len(names) != len(DEFAULTS[op]) * directions:
            need = len(DEFAULTS[op])
            return f"{len(names)} activations given where {directions} direction(s) need {need} each"
        unknown = sorted(set(names) - set(ACTIVATIONS.values()))
        return f"activations {unknown} are not one of {sorted(ACTIVATIONS)}" if unknown else None

    return check


def _rows(ctx: GPUContext, x: DeviceArray, start: int, count: int) -> DeviceArray:
    """Rows ``start`` to ``start + count`` of ``x`` along its first axis, copied."""
    shape = (count, *x.shape[1:])
    out = ctx.backend.empty(shape, x.dtype)
    strides = contiguous_strides(x.shape)
    copy_strided(ctx, x, out, shape, strides, contiguous_strides(shape), src_offset=start * strides[0])
    return out


class _Cell:
    """One direction: per gate, the projected input sequence ``(T, B, H)`` (with the input bias),
    the transposed recurrence weights and the recurrence bias; the activations; the clip."""

    def __init__(
        self,
        ctx: GPUContext,
        x: DeviceArray,
        w: DeviceArray,
        r: DeviceArray,
        b: DeviceArray | None,
        index: int,
    ) -> None:
        steps, batch, size = x.shape
        gates, hidden = GATES[ctx.node.op_type], r.shape[-1]
        per = len(DEFAULTS[ctx.node.op_type])
        self.functions = _activations(ctx.node)[index * per : (index + 1) * per]
        clip = ctx.attrs.get("clip")
        self.bounds = [] if clip is None else [scalar(ctx, -float(clip)), scalar(ctx, float(clip))]
        rows = x.view((steps * batch, size))
        weights, recurrence = index_along(ctx, w, 0, index), index_along(ctx, r, 0, index)
        bias = None if b is None else index_along(ctx, b, 0, index)
        zeros = ctx.backend.from_numpy(np.zeros(hidden, x.dtype))
        self.projected, self.recurrence, self.bias = [], [], []
        for g in range(gates):
            projected = matmul(ctx, rows, permuted(ctx, _rows(ctx, weights, g * hidden, hidden), [1, 0]))
            if bias is not None:
                add = (step("Add", [0, 1], x.dtype.name),)
                projected = run_chain(
                    ctx, add, [projected, _rows(ctx, bias, g * hidden, hidden)], "input_bias"
                )
            self.projected.append(projected.view((steps, batch, hidden)))
            self.recurrence.append(permuted(ctx, _rows(ctx, recurrence, g * hidden, hidden), [1, 0]))
            self.bias.append(zeros if bias is None else _rows(ctx, bias, (gates + g) * hidden, hidden))

    def gate(
        self, ctx: GPUContext, chain: ChainBuilder, g: int, t: int, h: DeviceArray, *extra: ChainValue
    ) -> ChainValue:
        """Gate ``g`` at step ``t``: ``x_t W_g^T + h R_g^T + Wb_g + Rb_g`` plus ``extra``, clipped."""
        projected = chain.input(index_along(ctx, self.projected[g], 0, t))
        total = chain.add("Add", projected, chain.input(matmul(ctx, h, self.recurrence[g])))
        for ref in (chain.input(self.bias[g]), *extra):
            total = chain.add("Add", total, ref)
        return self.clipped(chain, total)

    def clipped(self, chain: ChainBuilder, value: ChainValue) -> ChainValue:
        if not self.bounds:
            return value
        low, high = (chain.input(bound) for bound in self.bounds)
        return chain.add("Clip", value, low, high, has_min=True, has_max=True)

    def act(self, chain: ChainBuilder, k: int, value: ChainValue) -> ChainValue:
        """Activation ``k`` of this direction (0: gates, 1: candidate / cell, 2: LSTM output)."""
        return chain.add(self.functions[k], value)


def _rnn_step(ctx: GPUContext, cell: _Cell, t: int, states: list[DeviceArray]) -> list[DeviceArray]:
    chain = ChainBuilder()
    cell.act(chain, 0, cell.gate(ctx, chain, 0, t, states[0]))
    return [chain.run(ctx, states[0].dtype, "rnn_step")]


def _gru_step(ctx: GPUContext, cell: _Cell, t: int, states: list[DeviceArray]) -> list[DeviceArray]:
    """``h' = (1 - z) * g(n) + z * h``, the reset gate applied after (``linear_before_reset``) or
    before the candidate's recurrence product."""
    (h,) = states
    if ctx.attrs.get("linear_before_reset", 0):
        chain = ChainBuilder()
        reset = cell.act(chain, 0, cell.gate(ctx, chain, 1, t, h))
        recurrent = chain.add(
            "Add", chain.input(matmul(ctx, h, cell.recurrence[2])), chain.input(cell.bias[2])
        )
        candidate = chain.add(
            "Add", chain.input(index_along(ctx, cell.projected[2], 0, t)), chain.add("Mul", reset, recurrent)
        )
    else:
        chain = ChainBuilder()
        chain.add("Mul", cell.act(chain, 0, cell.gate(ctx, chain, 1, t, h)), chain.input(h))
        reset_h = chain.run(ctx, h.dtype, "gru_reset")
        chain = ChainBuilder()
        candidate = chain.add(
            "Add",
            chain.input(index_along(ctx, cell.projected[2], 0, t)),
            chain.input(matmul(ctx, reset_h, cell.recurrence[2])),
        )
        candidate = chain.add("Add", candidate, chain.input(cell.bias[2]))
    new = cell.act(chain, 1, cell.clipped(chain, candidate))
    update = cell.act(chain, 0, cell.gate(ctx, chain, 0, t, h))
    kept = chain.add("Mul", update, chain.input(h))
    chain.add("Add", chain.add("Sub", new, chain.add("Mul", update, new)), kept)
    return [chain.run(ctx, h.dtype, "gru_step")]


def _lstm_step(ctx: GPUContext, cell: _Cell, t: int, states: list[DeviceArray]) -> list[DeviceArray]:
    """Gates in ONNX's order i, o, f, c; peepholes (``P``) on i and f from the old cell, on o from the new."""
    h, c, *peepholes = states
    chain = ChainBuilder()
    old = chain.input(c)
    peep = [chain.input(p) for p in peepholes]
    inputs = cell.act(
        chain, 0, cell.gate(ctx, chain, 0, t, h, *([chain.add("Mul", peep[0], old)] if peep else []))
    )
    if ctx.attrs.get("input_forget", 0):
        forget = chain.add("Sub", chain.input(scalar(ctx, 1.0)), inputs)
    else:
        forget = cell.act(
            chain, 0, cell.gate(ctx, chain, 2, t, h, *([chain.add("Mul", peep[2], old)] if peep else []))
        )
    candidate = cell.act(chain, 1, cell.gate(ctx, chain, 3, t, h))
    chain.add("Add", chain.add("Mul", forget, old), chain.add("Mul", inputs, candidate))
    new_c = chain.run(ctx, c.dtype, "lstm_cell")
    chain = ChainBuilder()
    cell_ref = chain.input(new_c)
    extra = [chain.add("Mul", chain.input(peepholes[1]), cell_ref)] if peepholes else []
    out = cell.act(chain, 0, cell.gate(ctx, chain, 1, t, h, *extra))
    chain.add("Mul", out, cell.act(chain, 2, cell_ref))
    return [chain.run(ctx, h.dtype, "lstm_hidden"), new_c, *peepholes]


STEPS = {"RNN": _rnn_step, "GRU": _gru_step, "LSTM": _lstm_step}


def _masked(ctx: GPUContext, active: DeviceArray, new: DeviceArray, old: DeviceArray) -> DeviceArray:
    chain = ChainBuilder()
    chain.add("Where", chain.input(active), chain.input(new), chain.input(old))
    return chain.run(ctx, new.dtype, "recurrent_mask")


def recurrent(
    ctx: GPUContext,
    x: DeviceArray,
    w: DeviceArray,
    r: DeviceArray,
    b: DeviceArray | None,
    sequence_lens: DeviceArray | None,
    initial: Sequence[DeviceArray | None],
    peepholes: DeviceArray | None = None,
) -> tuple[DeviceArray, ...]:
    """``Y`` ``(T, D, B, H)`` and the final states ``(D, B, H)`` (batch first with ``layout`` 1)."""
    batchwise = bool(ctx.attrs.get("layout", 0))
    if batchwise:
        x = permuted(ctx, x, [1, 0, 2])
        initial = [None if s is None else permuted(ctx, s, [1, 0, 2]) for s in initial]
    steps, batch, _ = x.shape
    hidden = r.shape[-1]
    lengths = np.full(batch, steps) if sequence_lens is None else to_host(ctx, sequence_lens).reshape(-1)
    zeros = ctx.backend.from_numpy(np.zeros((batch, hidden), x.dtype))
    outputs, finals = [], []
    for index in range(w.shape[0]):
        cell = _Cell(ctx, x, w, r, b, index)
        states = [zeros if s is None else index_along(ctx, s, 0, index) for s in initial]
        states += (
            []
            if peepholes is None
            else [_rows(ctx, index_along(ctx, peepholes, 0, index), k * hidden, hidden) for k in range(3)]
        )
        reverse = index == 1 or as_text(ctx.attrs.get("direction", "forward")) == "reverse"
        ys: list[DeviceArray] = [zeros] * steps
        for t in range(steps - 1, -1, -1) if reverse else range(steps):
            new = STEPS[ctx.node.op_type](ctx, cell, t, states)
            if (lengths > t).all():
                states, ys[t] = new, new[0]
                continue
            active = ctx.backend.from_numpy((lengths > t).astype(np.int32).reshape(batch, 1))
            count = len(initial)
            states = [
                _masked(ctx, active, n, o) for n, o in zip(new[:count], states[:count], strict=True)
            ] + new[count:]
            ys[t] = _masked(ctx, active, new[0], zeros)
        outputs.append(concatenate(ctx, [y.view((1, 1, batch, hidden)) for y in ys], 0))
        empty = ctx.backend.from_numpy((lengths > 0).astype(np.int32).reshape(batch, 1))
        finals.append(
            [_masked(ctx, empty, s, zeros) if (lengths == 0).any() else s for s in states[: len(initial)]]
        )
    y = (
        concatenate(ctx, outputs, 1)
        if outputs[0].size
        else ctx.backend.empty((steps, len(outputs), batch, hidden), x.dtype)
    )
    states = [
        concatenate(ctx, [s.view((1, batch, hidden)) for s in state], 0)
        for state in zip(*finals, strict=True)
    ]
    if batchwise:
        y, states = permuted(ctx, y, [2, 0, 1, 3]), [permuted(ctx, s, [1, 0, 2]) for s in states]
    return (y, *states)


def _register() -> None:
    for op in ("RNN", "GRU"):
        GPU_KERNELS.register(op, check=_checker(op), dtypes=FLOATS)(
            lambda ctx, x, w, r, b=None, lengths=None, h=None: recurrent(ctx, x, w, r, b, lengths, [h])
        )
    GPU_KERNELS.register("LSTM", check=_checker("LSTM"), dtypes=FLOATS)(
        lambda ctx, x, w, r, b=None, lengths=None, h=None, c=None, p=None: recurrent(
            ctx, x, w, r, b, lengths, [h, c], p
        )
    )


_register()
