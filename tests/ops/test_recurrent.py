"""Recurrent operators (RNN, GRU, LSTM) against onnxruntime, and against onnx's reference
evaluator for what onnxruntime does not run (batch-first layout, float64, float16)."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from onnx.reference import ReferenceEvaluator
from spawnml.ir import Node
from spawnml.ops.defs.recurrent import SCHEMAS
from spawnml.ops.registry import OperatorRegistry
from spawnml.ops.schema import InferenceContext, TensorType

from tests.ops.conftest import make_model

#: float32 recurrences of a few steps against onnxruntime (different summation order and
#: activation approximations).
FLOAT = {"rtol": 1e-4, "atol": 1e-5}
#: float16 inputs against the reference evaluator, which computes in float16.
HALF = {"rtol": 2e-3, "atol": 2e-3}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
SEQUENCE, BATCH, INPUT, HIDDEN = 5, 3, 4, 6

rng = np.random.default_rng(0)


def randn(*shape: int, dtype=np.float32) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.5).astype(dtype)


def recurrent_inputs(
    op: str,
    directions: int = 1,
    bias: bool = True,
    lengths: list[int] | None = None,
    initial: bool = False,
    peepholes: bool = False,
    batchwise: bool = False,
    dtype=np.float32,
) -> dict[str, np.ndarray | None]:
    """Inputs of a recurrent node in its input order; None marks an omitted input."""
    rows = GATES[op] * HIDDEN
    x_shape = (BATCH, SEQUENCE, INPUT) if batchwise else (SEQUENCE, BATCH, INPUT)
    state_shape = (BATCH, directions, HIDDEN) if batchwise else (directions, BATCH, HIDDEN)
    inputs = {
        "x": randn(*x_shape, dtype=dtype),
        "w": randn(directions, rows, INPUT, dtype=dtype),
        "r": randn(directions, rows, HIDDEN, dtype=dtype),
        "b": randn(directions, 2 * rows, dtype=dtype) if bias else None,
        "sequence_lens": None if lengths is None else np.asarray(lengths, np.int32),
        "initial_h": randn(*state_shape, dtype=dtype) if initial else None,
    }
    if op == "LSTM":
        inputs["initial_c"] = randn(*state_shape, dtype=dtype) if initial else None
        inputs["p"] = randn(directions, 3 * HIDDEN, dtype=dtype) if peepholes else None
    return inputs


def recurrent_model(op: str, inputs: dict, outputs: list[str] | None = None, opset: int = 14, **attrs):
    """A one-node model and its feeds; all outputs unless ``outputs`` names some ('' skips one)."""
    feeds = {name: value for name, value in inputs.items() if value is not None}
    names = outputs if outputs is not None else ["y", "y_h", "y_c"][: 3 if op == "LSTM" else 2]
    model = make_model(op, feeds, names, opset, hidden_size=HIDDEN, **attrs)
    node_inputs = [name if value is not None else "" for name, value in inputs.items()]
    while not node_inputs[-1]:
        node_inputs.pop()
    model.graph.node[0].input[:] = node_inputs
    produced = [value for value in model.graph.output if value.name]
    del model.graph.output[:]
    model.graph.output.extend(produced)
    return model, feeds


def check_reference(model, feeds, rtol: float, atol: float) -> None:
    """Compare with onnx's reference evaluator."""
    ours = spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
    reference = ReferenceEvaluator(model).run(None, feeds)
    for got, want in zip(ours, reference, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


DIRECTION_COUNT = {"forward": 1, "reverse": 1, "bidirectional": 2}


@pytest.mark.parametrize("op", sorted(GATES))
@pytest.mark.parametrize("direction", sorted(DIRECTION_COUNT))
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("initial", [False, True])
def test_directions(check, op, direction, bias, initial):
    inputs = recurrent_inputs(op, DIRECTION_COUNT[direction], bias=bias, initial=initial)
    check(*recurrent_model(op, inputs, direction=direction), **FLOAT)


@pytest.mark.parametrize("op", sorted(GATES))
@pytest.mark.parametrize("direction", sorted(DIRECTION_COUNT))
@pytest.mark.parametrize("lengths", [[5, 3, 1], [2, 5, 4], [0, 5, 2]])
def test_sequence_lengths(check, op, direction, lengths):
    inputs = recurrent_inputs(op, DIRECTION_COUNT[direction], lengths=lengths, initial=True)
    check(*recurrent_model(op, inputs, direction=direction), **FLOAT)


@pytest.mark.parametrize("op", sorted(GATES))
@pytest.mark.parametrize("opset", [7, 14, 22])
def test_opsets(check, op, opset):
    check(*recurrent_model(op, recurrent_inputs(op), opset=opset), **FLOAT)


@pytest.mark.parametrize(
    "op, outputs",
    [(op, outputs) for op in sorted(GATES) for outputs in (["y"], ["", "y_h"])] + [("LSTM", ["", "", "y_c"])],
)
def test_optional_outputs(check, op, outputs):
    check(*recurrent_model(op, recurrent_inputs(op), outputs), **FLOAT)


@pytest.mark.parametrize("linear_before_reset", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_gru_linear_before_reset(check, linear_before_reset, direction):
    inputs = recurrent_inputs("GRU", DIRECTION_COUNT[direction], initial=True, lengths=[4, 5, 2])
    model = recurrent_model("GRU", inputs, direction=direction, linear_before_reset=linear_before_reset)
    check(*model, **FLOAT)


@pytest.mark.parametrize("direction", sorted(DIRECTION_COUNT))
@pytest.mark.parametrize("input_forget", [0, 1])
def test_lstm_peepholes(check, direction, input_forget):
    inputs = recurrent_inputs("LSTM", DIRECTION_COUNT[direction], initial=True, peepholes=True)
    check(*recurrent_model("LSTM", inputs, direction=direction, input_forget=input_forget), **FLOAT)


@pytest.mark.parametrize("op", sorted(GATES))
@pytest.mark.parametrize("clip", [0.3, 2.0])
def test_clip(check, op, clip):
    inputs = recurrent_inputs(op, 2, initial=True)
    inputs["x"] *= 4
    check(*recurrent_model(op, inputs, direction="bidirectional", clip=clip), **FLOAT)


#: Activation lists per direction with the parameters they consume in order.
ACTIVATION_CASES = [
    (["Relu", "Tanh", "Sigmoid"], [], []),
    (["LeakyRelu", "HardSigmoid", "Elu"], [], []),
    (["LeakyRelu", "HardSigmoid", "Elu"], [0.2, 0.3, 0.7], [0.4]),
    (["Affine", "ScaledTanh", "ThresholdedRelu"], [0.5, 1.5, 0.1], [0.2, 0.8]),
    (["Softsign", "Softplus", "Tanh"], [], []),
]


@pytest.mark.parametrize("op", sorted(GATES))
@pytest.mark.parametrize("names, alphas, betas", ACTIVATION_CASES)
@pytest.mark.parametrize("direction", ["reverse", "bidirectional"])
def test_activations(check, op, names, alphas, betas, direction):
    count = DIRECTION_COUNT[direction]
    chosen = names[: {"RNN": 1, "GRU": 2, "LSTM": 3}[op]] * count
    attrs = {"activations": chosen, "direction": direction}
    if alphas:
        attrs["activation_alpha"] = alphas * count
    if betas:
        attrs["activation_beta"] = betas * count
    check(*recurrent_model(op, recurrent_inputs(op, count, initial=True), **attrs), **FLOAT)


@pytest.mark.parametrize("op", ["GRU", "LSTM"])  # onnxruntime's RNN takes capitalised names only
def test_activation_names_ignore_case(check, op):
    names = ["sigmoid", "TANH", "Relu"][: 2 if op == "GRU" else 3]
    check(*recurrent_model(op, recurrent_inputs(op, initial=True), activations=names), **FLOAT)


@pytest.mark.parametrize("op", sorted(GATES))
@pytest.mark.parametrize("direction", sorted(DIRECTION_COUNT))
def test_batchwise_layout(op, direction):
    count = DIRECTION_COUNT[direction]
    inputs = recurrent_inputs(op, count, initial=True, peepholes=True, batchwise=True)
    check_reference(*recurrent_model(op, inputs, direction=direction, layout=1), **FLOAT)


@pytest.mark.parametrize("op", sorted(GATES))
def test_float64(op):
    inputs = recurrent_inputs(op, 2, initial=True, dtype=np.float64)
    check_reference(*recurrent_model(op, inputs, direction="bidirectional"), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", sorted(GATES))
def test_float16(op):
    inputs = recurrent_inputs(op, 1, initial=True, dtype=np.float16)
    check_reference(*recurrent_model(op, inputs, opset=22), **HALF)


# --- shape inference ---------------------------------------------------------------

REGISTRY = OperatorRegistry(SCHEMAS)


def infer(op: str, inputs: list, opset: int = 14, **attrs) -> list[TensorType]:
    schema = REGISTRY.lookup("", op, opset)
    node = Node(op, [f"i{n}" for n in range(len(inputs))], ["y", "y_h", "y_c"], attrs)
    types = [None if shape is None else TensorType(np.dtype(np.float32), shape) for shape in inputs]
    return list(schema.infer(InferenceContext(node, opset, schema.resolve_attrs(node), types)))


@pytest.mark.parametrize(
    "attrs, expected_y, expected_state",
    [
        ({}, ("T", 1, "B", 16), (1, "B", 16)),
        ({"direction": "bidirectional"}, ("T", 2, "B", 16), (2, "B", 16)),
        ({"layout": 1}, ("B", "T", 1, 16), ("B", 1, 16)),
    ],
)
def test_symbolic_shapes(attrs, expected_y, expected_state):
    x = ("B", "T", 8) if attrs.get("layout") else ("T", "B", 8)
    y, y_h, y_c = infer("LSTM", [x, (1, 64, 8), (1, 64, 16)], **attrs)
    assert y.shape == expected_y
    assert y_h.shape == y_c.shape == expected_state


# --- refused at load ---------------------------------------------------------------


@pytest.mark.parametrize(
    "op, attrs",
    [
        ("RNN", {"direction": "sideways"}),
        ("GRU", {"activations": ["Sigmoid", "Swish"]}),
        ("GRU", {"activations": ["Sigmoid"]}),
        ("LSTM", {"activations": ["Sigmoid", "Tanh", "Tanh"], "direction": "bidirectional"}),
        ("RNN", {"activations": ["ScaledTanh"], "activation_alpha": [1.0]}),
    ],
)
def test_refused_at_load(op, attrs):
    count = 2 if attrs.get("direction") == "bidirectional" else 1
    model, _ = recurrent_model(op, recurrent_inputs(op, count), **attrs)
    with pytest.raises(spawnml.UnsupportedOperatorError, match=op):
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])
