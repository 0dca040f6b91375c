"""Recurrent ai.onnx operators: RNN, GRU and LSTM.

Only the versions whose attributes changed have their own schema; version 22 only
widened the accepted element types.
"""

from __future__ import annotations

from typing import Any

from ...ir import Dim
from ..schema import Attribute, InferenceContext, InferFn, OpSchema, TensorType
from ..shapes import as_text

#: Attributes every recurrent operator has; ``direction`` defaults to forward.
_COMMON = (
    Attribute("activation_alpha", "floats"),
    Attribute("activation_beta", "floats"),
    Attribute("clip", "float"),
    Attribute("direction", "string", "forward"),
    Attribute("hidden_size", "int"),
)
_OUTPUT_SEQUENCE = Attribute("output_sequence", "int", 0)
_LAYOUT = Attribute("layout", "int", 0)
_LINEAR_BEFORE_RESET = Attribute("linear_before_reset", "int", 0)
_INPUT_FORGET = Attribute("input_forget", "int", 0)


def directions(attrs: dict[str, Any]) -> int:
    """How many directions a recurrent node runs: 2 when bidirectional, else 1."""
    return 2 if as_text(attrs.get("direction", "forward")) == "bidirectional" else 1


def _infer_recurrent(states: int) -> InferFn:
    """Infer ``Y`` and the ``states`` final-state outputs (``Y_h``, and ``Y_c`` for LSTM)."""

    def infer(ctx: InferenceContext) -> list[TensorType]:
        x = ctx.input(0) or TensorType(None, None)
        count = directions(ctx.attrs)
        hidden: Dim = ctx.attrs.get("hidden_size")
        recurrence = ctx.input(2)
        if hidden is None and recurrence is not None and recurrence.shape is not None:
            hidden = recurrence.shape[-1]
        if x.shape is None or len(x.shape) != 3:
            return [TensorType(x.dtype, None)] * (1 + states)
        batchwise = bool(ctx.attrs.get("layout", 0))
        steps, batch = (x.shape[1], x.shape[0]) if batchwise else x.shape[:2]
        y: tuple[Dim, ...]
        final: tuple[Dim, ...]
        if batchwise:
            y, final = (batch, steps, count, hidden), (batch, count, hidden)
        else:
            y, final = (steps, count, batch, hidden), (count, batch, hidden)
        return [TensorType(x.dtype, y), *[TensorType(x.dtype, final)] * states]

    return infer


def _versions(
    name: str,
    inputs: int,
    states: int,
    extra: tuple[Attribute, ...],
    versions: dict[int, tuple[Attribute, ...]],
) -> list[OpSchema]:
    """One schema per version of a recurrent operator, each with ``extra`` and its own attributes."""
    return [
        OpSchema(
            name,
            since_version=version,
            inputs=(3, inputs),
            outputs=(0, 1 + states),
            attributes=(*_COMMON, *extra, *own),
            infer=_infer_recurrent(states),
        )
        for version, own in versions.items()
    ]


_RNN_ACTIVATIONS = Attribute("activations", "strings", ["Tanh", "Tanh"])
_ACTIVATIONS = Attribute("activations", "strings")

SCHEMAS: list[OpSchema] = [
    *_versions(
        "RNN",
        6,
        1,
        (_RNN_ACTIVATIONS,),
        {1: (_OUTPUT_SEQUENCE,), 7: (), 14: (_LAYOUT,)},
    ),
    *_versions(
        "GRU",
        6,
        1,
        (_ACTIVATIONS,),
        {
            1: (_OUTPUT_SEQUENCE,),
            3: (_OUTPUT_SEQUENCE, _LINEAR_BEFORE_RESET),
            7: (_LINEAR_BEFORE_RESET,),
            14: (_LINEAR_BEFORE_RESET, _LAYOUT),
        },
    ),
    *_versions(
        "LSTM",
        8,
        2,
        (_ACTIVATIONS, _INPUT_FORGET),
        {1: (_OUTPUT_SEQUENCE,), 7: (), 14: (_LAYOUT,)},
    ),
]
