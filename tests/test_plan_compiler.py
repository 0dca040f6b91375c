"""A plan compiled to one function (from its second run on) gives the bits the steps' loop gives,
on every ONNX backend node case, and fails as the loop does, naming the node.

The reference is the same session's first run, which the loop runs: every later run must equal it
bit for bit (the element type, the shape and every byte; strings by value).
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper
from spawnml.conformance.case import Case
from spawnml.conformance.runner import Refusal, SpawnMLTarget
from spawnml.conformance.suite import load_cases

NO_OPT = spawnml.SessionOptions(graph_optimization_level="disable")
CASES = [case for case in load_cases(["node"]) if not case.skip]


def _outcome(case: Case, session: spawnml.InferenceSession) -> list[Any] | tuple[type, str]:
    """Every output of every run of the case, or the error's type and message."""
    try:
        runs = case.drive(session)
    except Exception as error:
        return type(error), str(error)
    return [output for run in runs for output in run]


def _same_bits(first: Any, later: Any) -> bool:
    if isinstance(first, list):
        return isinstance(later, list) and len(first) == len(later) and all(map(_same_bits, first, later))
    if first is None or later is None:
        return first is later
    first, later = np.asarray(first), np.asarray(later)
    if first.dtype != later.dtype or first.shape != later.shape:
        return False
    if first.dtype.kind in "OTU":  # strings: compare the text, not the object pointers
        return bool(np.array_equal(first, later))
    return first.tobytes() == later.tobytes()


def _loop_refused(*args: Any) -> None:
    raise AssertionError("the steps' loop ran where the compiled plan should have")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_compiled_runs_give_the_loops_bits_and_errors(case):
    try:
        session = SpawnMLTarget("cpu").open(case.model())
    except Refusal as refusal:
        pytest.skip(f"refused: {refusal}")
    assert isinstance(session, spawnml.InferenceSession)
    first = _outcome(case, session)  # the loop's run (a plan is compiled at its second run)
    _outcome(case, session)
    session._plan.__dict__["_run_steps"] = _loop_refused  # from here on, the compiled plan only
    later = _outcome(case, session)
    if isinstance(first, tuple):
        assert later == first
    else:
        assert isinstance(later, list)
        assert len(later) == len(first)
        for index, (expected, got) in enumerate(zip(first, later, strict=True)):
            assert _same_bits(expected, got), f"output {index} differs from the loop's"


def _model(nodes: list, inputs: list, outputs: list, initializers: list | None = None) -> bytes:
    graph = helper.make_graph(nodes, "plan", inputs, outputs, initializers or [])
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8
    ).SerializeToString()


def _float(name: str, shape: list) -> Any:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_a_kernel_failing_in_the_compiled_plan_is_named_as_in_the_loop():
    model = _model(
        [
            helper.make_node("Relu", ["x"], ["r"], name="first"),
            helper.make_node("Add", ["r", "y"], ["z"], name="sum"),
        ],
        [_float("x", ["n"]), _float("y", ["m"])],
        [_float("z", ["k"])],
    )
    session = spawnml.InferenceSession(model, NO_OPT, providers=["cpu"])
    good = {"x": np.ones(3, np.float32), "y": np.ones(3, np.float32)}
    bad = {"x": np.ones(3, np.float32), "y": np.ones(4, np.float32)}
    messages = []
    for feeds in (bad, good, bad, good, bad):  # the loop, then the compiled plan
        try:
            session.run(None, feeds)
        except spawnml.ExecutionError as error:
            messages.append(str(error))
    assert len(messages) == 3
    assert messages[0] == messages[1] == messages[2]
    assert "'sum' (Add)" in messages[0]


def test_outputs_stay_the_callers_and_defaults_serve_unfed_inputs():
    """A graph output that is a feed, one that is an initializer, one computed: each run's arrays
    are the caller's to change, and an input with an initializer default takes it when not fed."""
    bias = numpy_helper.from_array(np.array([1, 2, 3], np.float32), "bias")
    model = _model(
        [helper.make_node("Add", ["x", "bias"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        [_float("x", [3]), _float("bias", [3])],
        [_float("z", [3]), _float("x", [3]), _float("y", [3])],
        [bias],
    )
    ours = spawnml.InferenceSession(model, NO_OPT, providers=["cpu"])
    reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for run in range(4):
        feeds = {"x": np.array([-5, 0.5, run], np.float32)}
        if run % 2:
            feeds["bias"] = np.array([run, -run, 0.25], np.float32)
        got = ours.run(None, feeds)
        for expected, actual in zip(reference.run(None, feeds), got, strict=True):
            np.testing.assert_array_equal(actual, expected)
        kept = [array.copy() for array in got]
        got[0] += 100  # the caller's to change: the next run does not see it
        np.testing.assert_array_equal(ours.run(None, feeds)[0], kept[0])


def test_a_compiled_plan_goes_with_its_session_without_waiting_for_the_collector():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_float("x", [3])], [_float("y", [3])])
    session = spawnml.InferenceSession(model, NO_OPT, providers=["cpu"])
    for _ in range(3):
        session.run(None, {"x": np.ones(3, np.float32)})
    plan = weakref.ref(session._plan)
    assert session._plan.compiled is not None
    gc.disable()
    try:
        del session
        assert plan() is None
    finally:
        gc.enable()


def test_a_cast_of_a_scalar_a_kernel_gave_as_a_numpy_scalar_matches_onnxruntime():
    """Shape, then Gather of one index: a 0-d value, which a kernel may give as a numpy scalar."""
    index = numpy_helper.from_array(np.array(1, np.int64), "index")
    model = _model(
        [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "index"], ["width"]),
            helper.make_node("Cast", ["width"], ["y"], to=TensorProto.FLOAT),
        ],
        [_float("x", ["n", "m"])],
        [_float("y", [])],
        [index],
    )
    ours = spawnml.InferenceSession(model, NO_OPT, providers=["cpu"])
    reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for width in (3, 5, 7):
        feeds = {"x": np.zeros((2, width), np.float32)}
        got, expected = ours.run(None, feeds)[0], reference.run(None, feeds)[0]
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
