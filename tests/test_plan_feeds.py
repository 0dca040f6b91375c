"""Feeds are checked on every run: a run with feeds of other types or shapes than the last
accepted ones is refused as on a fresh session, and one like them runs as before."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import spawnml
from onnx import TensorProto, helper


def _model() -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["z"])],
        "feeds",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2]),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 2])],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8
    ).SerializeToString()


def _feeds(rows: int, dtype: type = np.float32, other_rows: int | None = None) -> dict[str, np.ndarray]:
    x = np.arange(rows * 2, dtype=dtype).reshape(rows, 2)
    y = np.ones((rows if other_rows is None else other_rows, 2), dtype)
    return {"x": x, "y": y}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_feeds(3, np.float64), r"expects tensor\(float\) but got tensor\(double\)"),
        (_feeds(3, other_rows=4), "dimension 'n'"),
        ({"x": np.ones((3, 3), np.float32), "y": np.ones((3, 3), np.float32)}, "axis 1: 3 != 2"),
        ({"x": np.ones((3, 2), np.float32)}, "missing input"),
        ({**_feeds(3), "w": np.ones(1, np.float32)}, "unknown input"),
    ],
)
def test_feeds_unlike_the_last_accepted_are_checked_again(bad, message):
    model = _model()
    session = spawnml.InferenceSession(model, providers=["cpu"])
    reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    good = _feeds(3)
    for _ in range(3):  # accepted, then run by the compiled plan
        np.testing.assert_array_equal(session.run(None, good)[0], reference.run(None, good)[0])
    with pytest.raises(spawnml.InvalidFeedError, match=message):
        session.run(None, bad)
    other = _feeds(5)
    np.testing.assert_array_equal(session.run(None, other)[0], reference.run(None, other)[0])
    with pytest.raises(spawnml.InvalidFeedError, match=message):
        session.run(None, bad)
