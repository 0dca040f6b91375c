"""Streaming TFLite models with resource-variable state against LiteRT's Interpreter.

The four microWakeWord detectors of pymicro-wakeword 2.5.0 (int8 input [1, 3, 40], uint8
output [1, 1]) keep six resource variables each, initialised by a CALL_ONCE subgraph. Each
stream is 150 chunks of a seeded synthetic feature stream. Besides the outputs, which are
near zero on audio that holds no wake word, every chunk compares the next value of every
variable (LiteRT's assigned tensors, which hold every convolution's recent inputs) with
the state the session keeps. Both run the same int8 model: SpawnML computes each operator
in float between dequantization and requantization, LiteRT in fixed-point, so a value may
round to a neighbouring step; the tolerance is one quantization step. Measured: no
difference at all, outputs and states, on all four models over 150 chunks.
Needs ``scripts/fetch-models micro-wakeword``; skips without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import spawnml
import tflite
from ai_edge_litert import interpreter as litert
from spawnml.errors import InvalidFeedError
from spawnml_models.assets import asset_file

from tests.model_files import require

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.filterwarnings("ignore:.*experimental_preserve_all_tensors:UserWarning"),
]

MODELS = ["alexa", "hey_jarvis", "hey_mycroft", "okay_nabu"]
CHUNKS = 150
#: LiteRT's fixed-point kernels and SpawnML's float ones may round a value to neighbouring steps.
STEPS = 1


def model(name: str) -> Path:
    return require(lambda: asset_file("micro-wakeword", f"{name}.tflite"))


def stream(seed: int, chunks: int = CHUNKS) -> Iterator[np.ndarray]:
    """Feature chunks like the models' spectrogram input: a drifting spectral shape plus noise."""
    rng = np.random.default_rng(seed)
    shape = rng.normal(-40, 30, 40)
    for index in range(chunks):
        shape += rng.normal(0, 4, 40)
        chunk = shape + 30 * np.sin(index / 6) + rng.normal(0, 25, (3, 40))
        yield np.clip(chunk, -128, 127).astype(np.int8)[None]


def assigned_tensors(path: Path) -> dict[str, int]:
    """Variable name -> the main-subgraph tensor its last ASSIGN_VARIABLE writes."""
    parsed = tflite.Model.GetRootAs(path.read_bytes(), 0)
    main = parsed.Subgraphs(0)
    handles: dict[int, str] = {}
    assigned: dict[str, int] = {}
    for position in range(main.OperatorsLength()):
        operator = main.Operators(position)
        code = parsed.OperatorCodes(operator.OpcodeIndex())
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin == tflite.BuiltinOperator.VAR_HANDLE:
            options = tflite.VarHandleOptions()
            table = operator.BuiltinOptions()
            options.Init(table.Bytes, table.Pos)
            handles[int(operator.Outputs(0))] = options.SharedName().decode()
        elif builtin == tflite.BuiltinOperator.ASSIGN_VARIABLE:
            assigned[handles[int(operator.Inputs(0))]] = int(operator.Inputs(1))
    return assigned


def steps(ours: np.ndarray, theirs: np.ndarray) -> int:
    assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape)
    return int(np.abs(ours.astype(np.int64) - theirs.astype(np.int64)).max(initial=0))


@pytest.mark.parametrize("name", MODELS)
def test_stream_matches_litert(name: str):
    path = model(name)
    session = spawnml.InferenceSession(path, providers=["cpu"])
    (feed,) = [arg.name for arg in session.get_inputs()]
    states = {state.name: state.output for state in session.graph.states}
    assigned = assigned_tensors(path)
    assert sorted(states) == sorted(assigned)
    interpreter = litert.Interpreter(model_path=str(path), experimental_preserve_all_tensors=True)
    interpreter.allocate_tensors()
    (source,), (target,) = interpreter.get_input_details(), interpreter.get_output_details()
    largest = {"output": 0, "state": 0}
    for index, chunk in enumerate(stream(seed=MODELS.index(name))):
        interpreter.set_tensor(source["index"], chunk)
        interpreter.invoke()
        (ours,) = session.run(None, {feed: chunk})
        largest["output"] = max(largest["output"], steps(ours, interpreter.get_tensor(target["index"])))
        for state in session.graph.states:  # what the session keeps for the next run
            ours_next, theirs = session._state[state.input], interpreter.get_tensor(assigned[state.name])
            assert isinstance(ours_next, spawnml.Tensor)
            largest["state"] = max(largest["state"], steps(ours_next.numpy(), theirs))
        assert max(largest.values()) <= STEPS, f"{name} chunk {index}: {largest}"
    print(f"{name}: largest difference over {CHUNKS} chunks, in steps: {largest}")


def test_state_is_hidden_and_reset_restarts_the_stream():
    path = model("hey_mycroft")
    session = spawnml.InferenceSession(path, providers=["cpu"])
    assert [arg.name for arg in session.get_inputs()] == ["serving_default_input_audio:0"]
    assert [(arg.type, arg.shape) for arg in session.get_outputs()] == [("tensor(uint8)", [1, 1])]
    assert len(session.graph.states) == 6
    chunks = list(stream(seed=7, chunks=40))
    first = [session.run(None, {"serving_default_input_audio:0": c})[0] for c in chunks]
    again = [session.run(None, {"serving_default_input_audio:0": c})[0] for c in chunks]
    session.reset_state()
    restarted = [session.run(None, {"serving_default_input_audio:0": c})[0] for c in chunks]
    np.testing.assert_array_equal(np.concatenate(first), np.concatenate(restarted))
    # the second pass starts from the state the first left: the stream's history shows
    assert not np.array_equal(np.concatenate(first), np.concatenate(again))


def test_state_cannot_be_fed_and_a_failed_run_keeps_it():
    path = model("okay_nabu")
    session = spawnml.InferenceSession(path, providers=["cpu"])
    state = session.graph.states[0]
    with pytest.raises(InvalidFeedError, match=r"hold the model's state.*reset_state"):
        session.run(None, {"serving_default_input_audio:0": next(stream(0)), state.input: state.initial})
    chunks = list(stream(seed=3, chunks=5))
    session.run(None, {"serving_default_input_audio:0": chunks[0]})
    before = {name: value.numpy() for name, value in session._state.items()}
    with pytest.raises(InvalidFeedError):
        session.run(None, {"serving_default_input_audio:0": chunks[1].astype(np.float32)})
    after = {name: value.numpy() for name, value in session._state.items()}
    assert before.keys() == after.keys()
    for name in before:
        np.testing.assert_array_equal(before[name], after[name])
