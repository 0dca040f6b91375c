"""Work per inference: a Loop that would run forever is stopped at ``max_loop_iterations``."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from onnx import TensorProto, helper
from spawnml import Limits, ModelLimitError
from spawnml.limits import limits_for_runs, run_limits


def endless_loop(trip_count: int) -> bytes:
    """``x`` incremented ``trip_count`` times, the condition always true."""
    scalar = lambda name, kind: helper.make_tensor_value_info(name, kind, [])  # noqa: E731
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Add", ["x", "one"], ["x_out"]),
        ],
        "body",
        [scalar("i", TensorProto.INT64), scalar("cond", TensorProto.BOOL), scalar("x", TensorProto.FLOAT)],
        [scalar("cond_out", TensorProto.BOOL), scalar("x_out", TensorProto.FLOAT)],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "go", "x0"], ["x"], body=body, name="forever")],
        "endless",
        [scalar("x0", TensorProto.FLOAT)],
        [scalar("x", TensorProto.FLOAT)],
        [
            helper.make_tensor("n", TensorProto.INT64, [], [trip_count]),
            helper.make_tensor("go", TensorProto.BOOL, [], [True]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def run(trip_count: int, limits: Limits | None = None) -> float:
    session = spawnml.InferenceSession(endless_loop(trip_count), limits=limits)
    return float(session.run(None, {"x0": np.array(0, np.float32)})[0])


def test_loop_within_the_session_limit_runs() -> None:
    assert run(100, Limits(max_loop_iterations=100)) == 100


def test_loop_past_the_session_limit_is_refused_naming_the_node() -> None:
    with pytest.raises(ModelLimitError) as refused:
        run(2**62, Limits(max_loop_iterations=100))
    assert "'forever'" in str(refused.value) and "max_loop_iterations" in str(refused.value)
    assert (refused.value.what, refused.value.value, refused.value.limit) == ("loop iterations", 101, 100)


def test_run_limits_apply_only_inside_their_context() -> None:
    with limits_for_runs(Limits(max_loop_iterations=5)):
        assert run_limits().max_loop_iterations == 5
    assert run_limits() is spawnml.limits.DEFAULT_LIMITS
