"""TreeEnsemble (ai.onnx.ml) on every GPU backend against onnxruntime: random forests using the
comparison branch modes, NaN features with and without missing-value tracking, several targets,
the four aggregates and the two post transforms run on the GPU (onnxruntime's scores without a
transform, then the transform by its definition: onnxruntime numbers the transforms otherwise);
float64 rows; SOFTMAX_ZERO refused at load. onnxruntime takes thresholds of the input's type
only: float64 thresholds, some of which no float32 row can equal, are checked with ONNX's
reference. Set membership is checked by the conformance case (onnxruntime takes integer members
only, and ONNX's reference hands the sets out in tree order and ends a set at a member 0).

Inputs are drawn from a small pool of values so that equality tests pass as often as they fail.
Tolerance: 1e-6 relative and absolute for float32 rows, 1e-12 for float64 (the leaf weights are
summed in the same order; the transforms use the device's exp).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.backends import GPU_BACKENDS, backend_or_skip

rng = np.random.default_rng(3)
POOL = np.array([-3, -2, -1.5, -1, 0, 0.5, 1, 2, 2.5, 3], np.float32)


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def random_forest(trees: int, depth: int, features: int, targets: int) -> dict:
    """The attributes of ``trees`` complete trees of ``depth`` branch levels, in branch modes 0 to 5."""
    attrs: dict[str, list] = {
        key: []
        for key in [
            "nodes_featureids",
            "nodes_modes",
            "nodes_splits",
            "nodes_truenodeids",
            "nodes_trueleafs",
            "nodes_falsenodeids",
            "nodes_falseleafs",
            "nodes_missing_value_tracks_true",
            "leaf_targetids",
            "leaf_weights",
            "tree_roots",
        ]
    }
    branches = 2**depth - 1
    for _ in range(trees):
        base, leaf_base = len(attrs["nodes_modes"]), len(attrs["leaf_targetids"])
        attrs["tree_roots"].append(base)
        for j in range(branches):
            mode = int(rng.integers(6))
            attrs["nodes_featureids"].append(int(rng.integers(features)))
            attrs["nodes_modes"].append(mode)
            # A pool value (exactly a float32) or one nudged off it (no float32 equals it).
            split = float(rng.choice(POOL)) + (1e-9 if rng.random() < 0.3 else 0.0)
            attrs["nodes_splits"].append(split)
            attrs["nodes_missing_value_tracks_true"].append(int(rng.integers(2)))
            for side, child in (("true", 2 * j + 1), ("false", 2 * j + 2)):
                leaf = child >= branches
                attrs[f"nodes_{side}nodeids"].append(leaf_base + child - branches if leaf else base + child)
                attrs[f"nodes_{side}leafs"].append(int(leaf))
        for _ in range(branches + 1):
            attrs["leaf_targetids"].append(int(rng.integers(targets)))
            attrs["leaf_weights"].append(float(rng.standard_normal()))
    return attrs


def forest_model(
    attrs: dict, targets: int, features: int, values: type = np.float32, rows: type = np.float32, **extra
) -> bytes:
    """A TreeEnsemble model; thresholds and weights of type ``values`` (onnxruntime takes the
    input's type only)."""
    tensors = {
        "nodes_modes": numpy_helper.from_array(np.array(attrs.pop("nodes_modes"), np.uint8)),
        "nodes_splits": numpy_helper.from_array(np.array(attrs.pop("nodes_splits"), values)),
        "leaf_weights": numpy_helper.from_array(np.array(attrs.pop("leaf_weights"), values)),
    }
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", n_targets=targets, **attrs, **tensors, **extra
    )
    graph = helper.make_graph(
        [node],
        "forest",
        [
            helper.make_tensor_value_info(
                "x", helper.np_dtype_to_tensor_dtype(np.dtype(rows)), [None, features]
            )
        ],
        [
            helper.make_tensor_value_info(
                "y", helper.np_dtype_to_tensor_dtype(np.dtype(rows)), [None, targets]
            )
        ],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10).SerializeToString()


CASES = [
    (1, 0, 3),  # SUM, NONE
    (0, 1, 3),  # AVERAGE, SOFTMAX
    (2, 2, 3),  # MIN, LOGISTIC
    (3, 0, 3),  # MAX, NONE
    (1, 0, 1),  # SUM, NONE, one target
]


def rows(features: int) -> np.ndarray:
    x = rng.choice(POOL, (64, features)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    return x


def on_gpu(provider: str, onnx_model: bytes, x: np.ndarray) -> np.ndarray:
    session = spawnml.InferenceSession(onnx_model, providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    return session.run(None, {"x": x})[0]


def transformed(scores: np.ndarray, transform: int) -> np.ndarray:
    """ONNX's post transform 1 (softmax over each row) or 2 (logistic), in float64."""
    scores = scores.astype(np.float64)
    if transform == 1:
        exp = np.exp(scores - scores.max(axis=1, keepdims=True))
        return exp / exp.sum(axis=1, keepdims=True)
    return 1 / (1 + np.exp(-scores)) if transform == 2 else scores


@pytest.mark.parametrize(
    ("aggregate", "transform", "targets"), CASES, ids=[str(i) for i in range(len(CASES))]
)
def test_tree_ensemble(provider: str, aggregate: int, transform: int, targets: int) -> None:
    """The scores against onnxruntime's without a post transform, then the transform by its
    definition (onnxruntime numbers the transforms otherwise: its 1 is the logistic)."""
    features = 5
    forest = random_forest(trees=6, depth=4, features=features, targets=targets)
    raw = forest_model(dict(forest), targets, features, aggregate_function=aggregate)
    x = rows(features)
    got = on_gpu(
        provider,
        forest_model(forest, targets, features, aggregate_function=aggregate, post_transform=transform),
        x,
    )
    (scores,) = onnxruntime.InferenceSession(raw, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert got.shape == scores.shape == (64, targets)
    np.testing.assert_allclose(got, transformed(scores, transform), rtol=1e-6, atol=1e-6)


def test_tree_ensemble_float64_thresholds(provider: str) -> None:
    """Thresholds float32 cannot hold, compared in float64 as ONNX's reference does."""
    forest = random_forest(trees=8, depth=4, features=4, targets=2)
    onnx_model = forest_model(forest, 2, 4, np.float64)
    x = rows(4)
    (want,) = ReferenceEvaluator(onnx.load_from_string(onnx_model)).run(None, {"x": x})
    np.testing.assert_allclose(on_gpu(provider, onnx_model, x), want, rtol=1e-6, atol=1e-6)


def test_tree_ensemble_float64_rows(provider: str) -> None:
    """float64 rows are compared and scored in float64, as onnxruntime does."""
    forest = random_forest(trees=8, depth=4, features=4, targets=2)
    onnx_model = forest_model(forest, 2, 4, np.float64, np.float64, aggregate_function=0)
    x = rows(4).astype(np.float64)
    (want,) = onnxruntime.InferenceSession(onnx_model, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = on_gpu(provider, onnx_model, x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_tree_ensemble_refuses_softmax_zero(provider: str) -> None:
    onnx_model = forest_model(random_forest(2, 2, 3, 2), 2, 3, post_transform=3)
    with pytest.raises(
        spawnml.UnsupportedOperatorError, match=r"post_transform 3 \(SOFTMAX_ZERO or PROBIT\)"
    ):
        spawnml.InferenceSession(onnx_model, providers=[provider])
