"""Control flow, sequence and optional operators of ai.onnx.

If, Loop, Scan and SequenceMap carry their bodies as graph attributes. Shape inference
only tracks tensors: outputs that are sequences or optionals are unknown, and a body
output's type is what the body declares for it.
"""

from __future__ import annotations

import numpy as np

from ...ir import TENSOR, Dim, Graph, Node, Shape, Value
from ..schema import REQUIRED, Attribute, InferenceContext, OpSchema, TensorType
from ..shapes import normalize_axis, same_as_input

UNKNOWN = TensorType(None, None)
INT64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)
FLOAT_CODE = 1  # the ONNX element type code of float32, SequenceEmpty's default

# ---------------------------------------------------------------------------- helpers


def _declared(value: Value) -> TensorType:
    """What a body declares about one of its outputs; unknown for sequences and optionals."""
    return TensorType(value.dtype, value.shape) if value.kind == TENSOR else UNKNOWN


def _either(first: TensorType | None, second: TensorType) -> TensorType:
    """The type of a value that is one of two: known dims they share, the dtype either gives."""
    first = first or UNKNOWN
    dtype = first.dtype if first.dtype is not None else second.dtype
    if first.shape is None or second.shape is None or len(first.shape) != len(second.shape):
        return TensorType(dtype, None)
    return TensorType(
        dtype, tuple(a if a == b else None for a, b in zip(first.shape, second.shape, strict=True))
    )


def _inserted(shape: Shape, axis: int, dim: Dim) -> Shape:
    """``shape`` with ``dim`` inserted at ``axis`` (counted in the longer shape)."""
    if shape is None:
        return None
    axis = normalize_axis(axis, len(shape) + 1)
    return (*shape[:axis], dim, *shape[axis:])


def _unknowns(ctx: InferenceContext) -> list[TensorType]:
    """Infer: every output unknown (the sequences and optionals inference does not track)."""
    return [UNKNOWN] * len(ctx.node.outputs)


def _scalar(dtype: np.dtype):
    """Infer: one scalar output of ``dtype``."""

    def infer(ctx: InferenceContext) -> list[TensorType]:
        return [TensorType(dtype, ())]

    return infer


# ---------------------------------------------------------------------------- rules
# Each says why a node cannot run as given (None if it can); every backend's kernels check them.


def _body_mismatch(what: str, body: Graph, inputs: int, outputs: int) -> str | None:
    """Why ``body`` cannot serve as ``what`` taking ``inputs`` and returning ``outputs`` values."""
    if len(body.inputs) != inputs or len(body.outputs) != outputs:
        return (
            f"{what} takes {len(body.inputs)} inputs and returns {len(body.outputs)} outputs; "
            f"the node needs {inputs} and {outputs}"
        )
    return None


def check_if(node: Node, opset: int) -> str | None:
    """Both branches take nothing and return the node's outputs."""
    for attr in ("then_branch", "else_branch"):
        problem = _body_mismatch(attr, node.attrs[attr], 0, len(node.outputs))
        if problem:
            return problem
    return None


def check_loop(node: Node, opset: int) -> str | None:
    """An output per carried value; the body takes the counters and carried values and returns them."""
    carried = len(node.inputs) - 2
    if len(node.outputs) < carried:
        return f"the loop carries {carried} values but has {len(node.outputs)} outputs"
    return _body_mismatch("body", node.attrs["body"], 2 + carried, 1 + len(node.outputs))


def check_scan(node: Node, opset: int) -> str | None:
    """Body arity, attribute lengths, directions of 0 or 1, and non-negative axes before opset 11."""
    scans = node.attrs["num_scan_inputs"]
    given = len(node.inputs) - (1 if opset < 9 else 0)
    states = given - scans
    if not 0 < scans <= given:
        return f"num_scan_inputs {scans} is not in 1..{given}"
    if len(node.outputs) < states:
        return f"the scan carries {states} states but has {len(node.outputs)} outputs"
    listed = {
        "directions": scans,
        "scan_input_axes": scans,
        "scan_input_directions": scans,
        "scan_output_axes": len(node.outputs) - states,
        "scan_output_directions": len(node.outputs) - states,
    }
    for attr, count in listed.items():
        values = node.attrs.get(attr)
        if values is not None and len(values) != count:
            return f"{attr} lists {len(values)} values for {count} tensors"
        if values is not None and "directions" in attr and not set(values) <= {0, 1}:
            return f"{attr} {list(values)} holds values other than 0 and 1"
        if values is not None and "axes" in attr and opset < 11 and min(values, default=0) < 0:
            return f"{attr} {list(values)} holds negative axes, allowed from opset 11"
    return _body_mismatch("body", node.attrs["body"], given, len(node.outputs))


def check_sequence_map(node: Node, opset: int) -> str | None:
    """The body takes one value per input and returns one per output."""
    return _body_mismatch("body", node.attrs["body"], len(node.inputs), len(node.outputs))


# ---------------------------------------------------------------------------- control flow


def _infer_if(ctx: InferenceContext) -> list[TensorType]:
    then_branch: Graph = ctx.attrs["then_branch"]
    else_branch: Graph = ctx.attrs["else_branch"]
    return [
        _either(_declared(a), _declared(b))
        for a, b in zip(then_branch.outputs, else_branch.outputs, strict=False)
    ]


def _infer_loop(ctx: InferenceContext) -> list[TensorType]:
    """Carried values are their initial value or the body's output; scan outputs gain an axis."""
    body: Graph = ctx.attrs["body"]
    carried = len(ctx.node.inputs) - 2
    outputs = [_declared(value) for value in body.outputs[1:]]
    finals = [_either(ctx.input(2 + i), out) for i, out in enumerate(outputs[:carried])]
    scanned = [TensorType(out.dtype, _inserted(out.shape, 0, None)) for out in outputs[carried:]]
    return finals + scanned


def _scan_length(ctx: InferenceContext, index: int, axis: int) -> Dim:
    source = ctx.input(index)
    if source is None or source.shape is None:
        return None
    return source.shape[normalize_axis(axis, len(source.shape))]


def _infer_scan8(ctx: InferenceContext) -> list[TensorType]:
    """States keep their (batched) type; scan outputs are ``[batch, sequence, *element]``."""
    body: Graph = ctx.attrs["body"]
    states = len(ctx.node.inputs) - 1 - ctx.attrs["num_scan_inputs"]
    outputs = [_declared(value) for value in body.outputs]
    first_scan = 1 + states
    batch, length = _scan_length(ctx, first_scan, 0), _scan_length(ctx, first_scan, 1)
    finals = [ctx.input(1 + i) or UNKNOWN for i in range(states)]
    scanned = [
        TensorType(out.dtype, _inserted(_inserted(out.shape, 0, length), 0, batch))
        for out in outputs[states:]
    ]
    return finals + scanned


def _infer_scan(ctx: InferenceContext) -> list[TensorType]:
    """States keep their type; scan outputs gain the scan length at their output axis."""
    body: Graph = ctx.attrs["body"]
    scans = ctx.attrs["num_scan_inputs"]
    states = len(ctx.node.inputs) - scans
    outputs = [_declared(value) for value in body.outputs]
    input_axes = ctx.attrs.get("scan_input_axes") or [0] * scans
    output_axes = ctx.attrs.get("scan_output_axes") or [0] * (len(outputs) - states)
    length = _scan_length(ctx, states, input_axes[0])
    finals = [_either(ctx.input(i), out) for i, out in enumerate(outputs[:states])]
    scanned = [
        TensorType(out.dtype, _inserted(out.shape, axis, length))
        for out, axis in zip(outputs[states:], output_axes, strict=False)
    ]
    return finals + scanned


_BODY = Attribute("body", "graph", REQUIRED)
_SCAN_COUNT = Attribute("num_scan_inputs", "int", REQUIRED)

# ---------------------------------------------------------------------------- schemas

SCHEMAS: list[OpSchema] = [
    OpSchema(
        "If",
        since_version=1,
        outputs=(1, -1),
        attributes=(Attribute("then_branch", "graph", REQUIRED), Attribute("else_branch", "graph", REQUIRED)),
        infer=_infer_if,
    ),
    OpSchema(
        "Loop", since_version=1, inputs=(2, -1), outputs=(1, -1), attributes=(_BODY,), infer=_infer_loop
    ),
    OpSchema(
        "Scan",
        since_version=8,
        inputs=(2, -1),
        outputs=(1, -1),
        attributes=(_BODY, _SCAN_COUNT, Attribute("directions", "ints")),
        infer=_infer_scan8,
    ),
    OpSchema(
        "Scan",
        since_version=9,
        inputs=(1, -1),
        outputs=(1, -1),
        attributes=(
            _BODY,
            _SCAN_COUNT,
            Attribute("scan_input_axes", "ints"),
            Attribute("scan_input_directions", "ints"),
            Attribute("scan_output_axes", "ints"),
            Attribute("scan_output_directions", "ints"),
        ),
        infer=_infer_scan,
    ),
    OpSchema(
        "SequenceEmpty",
        since_version=11,
        inputs=(0, 0),
        attributes=(Attribute("dtype", "int", FLOAT_CODE),),
        infer=_unknowns,
    ),
    OpSchema("SequenceConstruct", since_version=11, inputs=(1, -1), infer=_unknowns),
    OpSchema("SequenceAt", since_version=11, inputs=(2, 2), infer=_unknowns),
    OpSchema("SequenceInsert", since_version=11, inputs=(2, 3), infer=_unknowns),
    OpSchema("SequenceErase", since_version=11, inputs=(1, 2), infer=_unknowns),
    OpSchema("SequenceLength", since_version=11, infer=_scalar(INT64)),
    OpSchema(
        "ConcatFromSequence",
        since_version=11,
        attributes=(Attribute("axis", "int", REQUIRED), Attribute("new_axis", "int", 0)),
        infer=_unknowns,
    ),
    OpSchema(
        "SplitToSequence",
        since_version=11,
        inputs=(1, 2),
        attributes=(Attribute("axis", "int", 0), Attribute("keepdims", "int", 1)),
        infer=_unknowns,
    ),
    OpSchema(
        "SequenceMap", since_version=17, inputs=(1, -1), outputs=(1, -1), attributes=(_BODY,), infer=_unknowns
    ),
    OpSchema(
        "Optional",
        since_version=15,
        inputs=(0, 1),
        attributes=(Attribute("type", "type_proto"),),
        infer=_unknowns,
    ),
    OpSchema("OptionalHasElement", since_version=15, infer=_scalar(BOOL)),
    OpSchema("OptionalHasElement", since_version=18, inputs=(0, 1), infer=_scalar(BOOL)),
    OpSchema("OptionalGetElement", since_version=15, infer=same_as_input()),
]
