"""The fuzz properties, as functions of hypothesis-drawn data, shared by the CI tests and ``scripts/fuzz``."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import spawnml
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto, helper

from .mutate import mutated
from .seeds import SEEDS
from .targets import check_feed, check_load

#: A fuzz case: a function of hypothesis' ``data`` object.
Case = Callable[[st.DataObject], None]


@cache
def seed(target: str) -> bytes:
    return SEEDS[target]()


def loader_case(target: str) -> Case:
    """Load a mutation of ``target``'s seed file."""

    def case(data: st.DataObject) -> None:
        check_load(target, data.draw(mutated(seed(target)), label="file"))

    return case


@cache
def feed_session() -> spawnml.InferenceSession:
    """``y = x * s`` with ``x: float[batch, 3]``, ``s: int64[]`` optional through an initializer default."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "s"], ["y"])],
        "feeds",
        [x, s],
        [y],
        [helper.make_tensor("s", TensorProto.FLOAT, [], [2.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return spawnml.InferenceSession(model.SerializeToString())


DTYPES = hnp.scalar_dtypes() | hnp.byte_string_dtypes() | hnp.unicode_string_dtypes()
ARRAYS = hnp.arrays(DTYPES, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
OBJECTS = st.one_of(
    ARRAYS,
    st.none(),
    st.text(max_size=8),
    st.floats(),
    st.integers(),
    st.lists(st.floats(allow_nan=False) | st.integers(-3, 3), max_size=4),
    st.lists(st.lists(st.floats(width=32), min_size=3, max_size=3), max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
NAMES = st.sampled_from(["x", "s", "y", ""]) | st.text(max_size=3)


def feed_case(data: st.DataObject) -> None:
    """Arbitrary names, arrays, dtypes, shapes and non-array objects fed to a session."""
    feeds = data.draw(st.dictionaries(NAMES, OBJECTS, max_size=3), label="feeds")
    check_feed(feed_session(), feeds)


def valid_feed_runs() -> np.ndarray:
    """The feed session's answer on a valid feed, to show the property is not vacuous."""
    return feed_session().run(None, {"x": np.ones((2, 3), np.float32)})[0]


CASES: dict[str, Case] = {**{target: loader_case(target) for target in SEEDS}, "feeds": feed_case}
