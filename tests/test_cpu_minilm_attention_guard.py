"""MiniLM's attention guard on the CPU against onnxruntime: the scores plus the additive mask, their
softmax, and ``Where(IsNaN(p), 0, p)``, which replaces the NaN rows of fully masked queries.

Where gives a view of the branch it picks when the condition holds nowhere or everywhere and that
branch has the result's shape, a copy when it must broadcast, and numpy's where otherwise. The
cases: no key masked (the guard never fires), keys masked by -3.4e38 (finite: no NaN) and rows
masked by -inf (NaN rows, which the guard zeroes), and Where alone with conditions true nowhere,
everywhere and in part, broadcast or not. Each graph runs unoptimized, so every node runs.
Tolerances: within rtol 1e-5 / atol 1e-7 of onnxruntime; Where alone exactly.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper

SCORES = (1, 12, 128, 128)


def _guard_model() -> bytes:
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    nodes = [
        helper.make_node("Add", ["scores", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
        helper.make_node("IsNaN", ["p"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "p"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "guard",
        [
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, SCORES),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, (1, 1, 128, 128)),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [zero],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8
    ).SerializeToString()


def _where_model(shapes: tuple[tuple[int, ...], ...]) -> bytes:
    names, types = ("c", "x", "y"), (TensorProto.BOOL, TensorProto.FLOAT, TensorProto.FLOAT)
    graph = helper.make_graph(
        [helper.make_node("Where", list(names), ["out"])],
        "where",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in zip(names, types, shapes, strict=True)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8
    ).SerializeToString()


def _both(model: bytes, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    options = spawnml.SessionOptions(graph_optimization_level="disable")
    (ours,) = spawnml.InferenceSession(model, options, providers=["cpu"]).run(None, feeds)
    (want,) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    return ours, want


def _mask(fill: float, keys: int, rows: int) -> np.ndarray:
    """0 where attended; ``fill`` on the last ``keys`` keys and on the last ``rows`` queries' rows."""
    mask = np.zeros((1, 1, 128, 128), np.float32)
    mask[..., 128 - keys :] = fill
    mask[..., 128 - rows :, :] = fill
    return mask


@pytest.mark.parametrize(
    ("fill", "keys", "rows"),
    [(0.0, 0, 0), (np.finfo(np.float32).min, 40, 0), (-np.inf, 40, 0), (-np.inf, 0, 9)],
    ids=["unmasked", "lowest-keys", "inf-keys", "inf-rows"],
)
def test_guarded_softmax_matches_onnxruntime(fill: float, keys: int, rows: int) -> None:
    scores = (np.random.default_rng(1).standard_normal(SCORES) * 3).astype(np.float32)
    ours, want = _both(_guard_model(), {"scores": scores, "mask": _mask(fill, keys, rows)})
    assert not np.isnan(want).any()
    np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("holds", ["nowhere", "everywhere", "in-part"])
@pytest.mark.parametrize(
    "shapes",
    [((4, 6), (4, 6), (4, 6)), ((4, 6), (), (4, 6)), ((4, 6), (4, 6), ()), ((1, 6), (4, 1), (4, 6))],
    ids=["same", "scalar-x", "scalar-y", "broadcast"],
)
def test_where_matches_onnxruntime(holds: str, shapes: tuple[tuple[int, ...], ...]) -> None:
    rng = np.random.default_rng(2)
    condition = {"nowhere": np.zeros, "everywhere": np.ones}.get(holds)
    c = condition(shapes[0], bool) if condition else rng.random(shapes[0]) < 0.5
    feeds = {"c": c, "x": rng.standard_normal(shapes[1]).astype(np.float32)}
    feeds["y"] = rng.standard_normal(shapes[2]).astype(np.float32)
    ours, want = _both(_where_model(shapes), feeds)
    np.testing.assert_array_equal(ours, want)
    assert ours.shape == want.shape and ours.flags.writeable
