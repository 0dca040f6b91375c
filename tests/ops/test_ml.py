"""ai.onnx.ml operators against onnxruntime: feature transforms, encoders, linear models,
support vector machines and tree ensembles.

Where onnxruntime has no kernel for a type the specification allows, or answers a
configuration inconsistently (two-class tree ensembles weighting both classes), the
reference is onnx's ReferenceEvaluator. Tolerances: scores are float32 and summed in a
different order, so 1e-5 relative. PROBIT uses onnxruntime's approximation of erfinv, which
cancels catastrophically near p = 0.5 (where float32 rounding decides the result), so it is
tested on probabilities at least 0.05 away from 0.5.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.ops.conftest import assert_close, make_model

ML = "ai.onnx.ml"
F32, F64, I32, I64 = np.float32, np.float64, np.int32, np.int64
SCORES = {"rtol": 1e-5, "atol": 1e-6}
TRANSFORMS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"]
#: Probabilities away from 0.5 (see above), and some outside [0, 1], where PROBIT gives NaN.
PROBABILITIES = np.array([[0.01, 0.2, 0.45], [0.55, 0.7, 0.999], [1e-6, 0.3, 0.9], [-0.5, 1.5, 0.62]], F32)
IDENTITY = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]

rng = np.random.default_rng(0)


def ml_model(op: str, inputs: dict, version: int = 1, outputs: int = 1, **attrs) -> onnx.ModelProto:
    """A one-node ai.onnx.ml model at ``version`` of the domain."""
    model = make_model(op, inputs, outputs, opset=17, domain=ML, **attrs)
    model.opset_import[1].version = version
    return model


def tensor(values, dtype) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=dtype))


def strings(*values: str) -> np.ndarray:
    return np.array(values, dtype=object)


def check_reference(model: onnx.ModelProto, feeds: dict, **tolerance) -> None:
    """Compare with onnx's ReferenceEvaluator (same dtypes and shapes)."""
    ours = spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)
    reference = [np.asarray(out) for out in ReferenceEvaluator(model).run(None, feeds)]
    reference = [out.astype(object) if out.dtype.kind == "U" else out for out in reference]
    assert_close(ours, reference, **(tolerance or SCORES))


def refused(model: onnx.ModelProto) -> str:
    with pytest.raises(spawnml.UnsupportedOperatorError) as error:
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])
    return str(error.value)


# Feature transforms ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "indices"),
    [
        (rng.standard_normal((3, 5)).astype(F32), np.array([4, 0, 0], I64)),
        (rng.standard_normal(5).astype(F32), np.array([1, 3], I64)),
        (rng.standard_normal((2, 3, 4)).astype(F64), np.array([[3], [1]], I64)),
        (np.arange(6, dtype=I32).reshape(2, 3), np.array(2, I64)),
        (strings("a", "b", "c", "d").reshape(2, 2), np.array([1], I64)),
    ],
    ids=["matrix", "vector", "rank3", "scalar-index", "strings"],
)
def test_array_feature_extractor(check, x, indices):
    check(ml_model("ArrayFeatureExtractor", {"x": x, "i": indices}), {"x": x, "i": indices})


def test_binarizer(check):
    x = rng.standard_normal((3, 4)).astype(F32)
    check(ml_model("Binarizer", {"x": x}, threshold=0.25), {"x": x})


@pytest.mark.parametrize("dtype", [F64, I64, I32])
def test_binarizer_other_types(dtype):
    """onnxruntime runs float32 only."""
    x = (rng.standard_normal((3, 4)) * 3).astype(dtype)
    check_reference(ml_model("Binarizer", {"x": x}, threshold=0.5), {"x": x})


@pytest.mark.parametrize("dtype", [F32, F64, I64, I32])
@pytest.mark.parametrize(("scale", "offset"), [([2.0], [1.0]), ([1.0, -2.0, 0.5], [0.5, 0.0, -1.0])])
def test_scaler(check, dtype, scale, offset):
    x = (rng.standard_normal((4, 3)) * 4).astype(dtype)
    check(ml_model("Scaler", {"x": x}, scale=scale, offset=offset), {"x": x})


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("dtype", [F32, F64, I64, I32])
def test_normalizer(check, norm, dtype):
    x = (rng.standard_normal((4, 3)) * 4).astype(dtype)
    x[1] = 0  # a zero row is kept as it is
    x[2] = -np.abs(x[2]) - 1  # MAX divides by the largest value, here negative
    check(ml_model("Normalizer", {"x": x}, norm=norm), {"x": x})


def test_normalizer_vector_and_nan(check):
    x = np.array([[np.nan, 4, -1, 0.5], [1, 2, 3, 4]], F32)
    for norm in ("MAX", "L1", "L2"):
        check(ml_model("Normalizer", {"x": x}, norm=norm), {"x": x})
        check(ml_model("Normalizer", {"x": x[1]}, norm=norm), {"x": x[1]})


@pytest.mark.parametrize(
    ("x", "attrs"),
    [
        (np.array([[1, np.nan, 3], [np.nan, 5, 0]], F32), {"imputed_value_floats": [9.0]}),
        (
            np.array([[1, np.nan, 3], [np.nan, 5, 0]], F32),
            {"imputed_value_floats": [7.0, 8.0, 9.0], "replaced_value_float": float("nan")},
        ),
        (
            np.array([[1, -1, 3], [-1, 5, -1]], F32),
            {"imputed_value_floats": [7.0], "replaced_value_float": -1.0},
        ),
        (np.array([1, -1, 3], F32), {"imputed_value_floats": [7.0, 8.0, 9.0], "replaced_value_float": -1.0}),
        (
            np.array([[1, -1, 3], [-1, 5, 0]], I64),
            {"imputed_value_int64s": [7, 8, 9], "replaced_value_int64": -1},
        ),
    ],
    ids=["zero-by-one", "nan-per-feature", "value", "vector", "int64"],
)
def test_imputer(check, x, attrs):
    check(ml_model("Imputer", {"x": x}, **attrs), {"x": x})


@pytest.mark.parametrize(
    ("x", "attrs"),
    [
        (np.array([[1, 3], [2, 7]], I64), {"cats_int64s": [1, 2, 3]}),
        (strings("a", "c", "z"), {"cats_strings": ["a", "b", "c"]}),
        (np.array([1.0, 2.7, -3.0, 3.0], F32), {"cats_int64s": [1, 2, 3, -3]}),
        (np.array([1.0, 2.7, 3.0], F64), {"cats_int64s": [3, 2, 1], "zeros": 1}),
        (np.array(2, I64), {"cats_int64s": [1, 2, 3]}),
    ],
    ids=["int64", "strings", "float-truncated", "double", "scalar"],
)
def test_one_hot_encoder(check, x, attrs):
    check(ml_model("OneHotEncoder", {"x": x}, **attrs), {"x": x})


def test_one_hot_encoder_unknown_category_with_zeros_0():
    model = ml_model("OneHotEncoder", {"x": np.array([1, 5], I64)}, cats_int64s=[1, 2], zeros=0)
    session = spawnml.InferenceSession(model.SerializeToString())
    with pytest.raises(spawnml.SpawnMLError, match="no category"):
        session.run(None, {"x": np.array([1, 5], I64)})
    np.testing.assert_array_equal(session.run(None, {"x": np.array([2, 1], I64)})[0], [[0, 1], [1, 0]])


@pytest.mark.parametrize(
    ("x", "attrs"),
    [
        (strings("a", "z", "b", "c").reshape(2, 2), {}),
        (np.array([10, 5, 30, 20], I64), {"default_string": "?"}),
        (np.array([10, 5, 30], I64), {"cats_int64s": [10, 10, 30]}),
        (strings("a", "q"), {"default_int64": 99}),
    ],
    ids=["strings", "ints", "repeated-key", "default"],
)
def test_category_mapper(check, x, attrs):
    attrs = {"cats_strings": ["a", "b", "c"], "cats_int64s": [10, 20, 30], **attrs}
    check(ml_model("CategoryMapper", {"x": x}, **attrs), {"x": x})


@pytest.mark.parametrize(
    ("shapes", "widths"),
    [([(2, 3), (2, 1)], [2, 3]), ([(3,), (1,)], [3, 1]), ([(2, 2, 3), (2, 1)], [6, 1]), ([(2, 2, 3)], [4])],
    ids=["cut-and-pad", "vectors", "rank3", "rank3-cut"],
)
@pytest.mark.parametrize("dtype", [F32, F64, I64, I32])
def test_feature_vectorizer(check, shapes, widths, dtype):
    feeds = {f"x{i}": (rng.standard_normal(shape) * 5).astype(dtype) for i, shape in enumerate(shapes)}
    check(ml_model("FeatureVectorizer", feeds, inputdimensions=widths), feeds)


# LabelEncoder ---------------------------------------------------------------------------------

LABEL_ENCODERS = [
    (1, strings("b", "a", "z"), {"classes_strings": ["b", "a", "b"]}),
    (1, np.array([0, 2, 5, -1], I64), {"classes_strings": ["b", "a", "c"], "default_string": "?"}),
    (2, strings("a", "b", "z", "a"), {"keys_strings": ["a", "b", "a"], "values_int64s": [1, 2, 3]}),
    (
        2,
        np.array([1.5, np.nan, 2, -0.0], F32),
        {"keys_floats": [1.5, float("nan"), 0.0], "values_strings": list("xnz")},
    ),
    (2, np.array([1.5, 2], F32), {"keys_floats": [1.5], "values_floats": [7.0], "default_float": 3.0}),
    (2, np.array([[1, 3], [4, 1]], I64), {"keys_int64s": [1, 4], "values_floats": [7.0, 8.0]}),
    (2, np.array([1, 3], I64), {"keys_int64s": [1], "values_int64s": [7], "default_int64": 0}),
    (4, np.array([np.nan, 1], F32), {"keys_floats": [float("nan")], "values_int64s": [9]}),
    (
        4,
        np.array([1.5, 3], F64),
        {"keys_tensor": tensor([1.5, 2.5], F64), "values_tensor": tensor([10, 20], F64)},
    ),
    (
        4,
        np.array([1.5, 3], F64),
        {
            "keys_tensor": tensor([1.5, 2.5], F64),
            "values_tensor": tensor([10, 20], F64),
            "default_tensor": tensor([-5], F64),
        },
    ),
    (4, strings("a", "b", "c", "a").reshape(2, 2), {"keys_strings": ["a"], "values_strings": ["A"]}),
    (4, strings("a", "b"), {"keys_strings": ["a"], "values_tensor": tensor([4], np.int16)}),
    (4, strings("a", "b"), {"keys_strings": ["a"], "values_tensor": tensor(["A"], object)}),
]


@pytest.mark.parametrize(("version", "x", "attrs"), LABEL_ENCODERS)
def test_label_encoder(check, version, x, attrs):
    check(ml_model("LabelEncoder", {"x": x}, version=version, **attrs), {"x": x})


def test_label_encoder_types_onnxruntime_lacks():
    x = np.array([1, 3, 2], np.int16)
    attrs = {"keys_tensor": tensor([1, 2], np.int16), "values_strings": ["p", "q"]}
    check_reference(ml_model("LabelEncoder", {"x": x}, version=4, **attrs), {"x": x})


# Linear models ---------------------------------------------------------------------------------

COEFFICIENTS = [0.5, -1.0, 2.0, 1.0, 1.0, 1.0, -0.5, 0.2, 0.1]


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("dtype", [F32, F64, I64, I32])
def test_linear_classifier(check, transform, dtype):
    x = (rng.uniform(0, 1, (5, 3)) * (4 if dtype in (I64, I32) else 0.6)).astype(dtype)
    attrs = {"coefficients": COEFFICIENTS, "intercepts": [0.1, -0.2, 0.3], "post_transform": transform}
    check(
        ml_model("LinearClassifier", {"x": x}, outputs=2, classlabels_ints=[5, 6, 7], **attrs),
        {"x": x},
        **SCORES,
    )


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("labels", [{"classlabels_ints": [0, 1]}, {"classlabels_strings": ["no", "yes"]}])
def test_linear_classifier_binary(check, transform, labels):
    """One row of coefficients scores two classes: ``[1 - s, s]`` or the logistic of ``s``."""
    x = rng.standard_normal((6, 3)).astype(F32)
    attrs = {"coefficients": COEFFICIENTS[:3], "intercepts": [0.1], "post_transform": transform, **labels}
    check(ml_model("LinearClassifier", {"x": x}, outputs=2, **attrs), {"x": x}, **SCORES)


@pytest.mark.parametrize("op", ["LinearClassifier", "LinearRegressor"])
def test_linear_probit(check, op):
    x = PROBABILITIES
    attrs = {"coefficients": IDENTITY, "intercepts": [0.0, 0.0, 0.0], "post_transform": "PROBIT"}
    if op == "LinearClassifier":
        model = ml_model(op, {"x": x}, outputs=2, classlabels_ints=[5, 6, 7], **attrs)
    else:
        model = ml_model(op, {"x": x}, targets=3, **attrs)
    check(model, {"x": x}, **SCORES)


def test_linear_classifier_refusals():
    x = np.zeros((1, 3), F32)
    binary = {"coefficients": COEFFICIENTS[:3], "intercepts": [0.1], "classlabels_ints": [0, 1]}
    assert "PROBIT" in refused(
        ml_model("LinearClassifier", {"x": x}, outputs=2, post_transform="PROBIT", **binary)
    )
    three_labels = {**binary, "classlabels_ints": [0, 1, 2]}
    assert "class labels" in refused(ml_model("LinearClassifier", {"x": x}, outputs=2, **three_labels))


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("targets", [1, 3])
def test_linear_regressor(check, transform, targets):
    """With one target onnxruntime applies PROBIT only; with more, every transform."""
    x = rng.uniform(0, 0.3, (5, 3)).astype(F32)
    attrs = {"coefficients": COEFFICIENTS[: 3 * targets], "intercepts": [0.1, -0.2, 0.3][:targets]}
    model = ml_model("LinearRegressor", {"x": x}, targets=targets, post_transform=transform, **attrs)
    check(model, {"x": x}, **SCORES)


def test_linear_regressor_double():
    """onnxruntime runs float32 only; the reference evaluator answers in the input's type."""
    x = rng.uniform(0, 3, (5, 3))
    model = ml_model("LinearRegressor", {"x": x}, coefficients=COEFFICIENTS[:3], intercepts=[0.5])
    (ours,) = spawnml.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    (reference,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert ours.dtype == F32
    np.testing.assert_allclose(ours, reference, **SCORES)


# Tree ensembles --------------------------------------------------------------------------------

LEGACY_MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def random_forest(trees: int, depth: int, features: int, modes=("BRANCH_LEQ",), seed: int = 0) -> dict:
    """Legacy node attributes of random trees, and their leaves as ``(tree, node)`` pairs.

    Thresholds are multiples of 0.25, so inputs drawn from the same grid hit the equality
    modes; nodes are listed in shuffled order after each tree's root.
    """
    generator = np.random.default_rng(seed)
    keys = ("treeids", "nodeids", "featureids", "modes", "values", "truenodeids", "falsenodeids")
    attrs = {key: [] for key in (*keys, "missing_value_tracks_true")}
    leaves = []
    for tree in range(trees):
        rows = random_tree(generator, depth, features, modes)
        order = [rows[0], *(rows[i] for i in generator.permutation(np.arange(1, len(rows))))]
        for row in order:
            for key, item in zip(attrs, (tree, *row), strict=True):
                attrs[key].append(item)
        leaves += [(tree, row[0]) for row in rows if row[2] == "LEAF"]
    return {f"nodes_{key}": value for key, value in attrs.items()}, leaves


def random_tree(generator, depth: int, features: int, modes) -> list[tuple]:
    """``(node, feature, mode, threshold, true node, false node, missing tracks true)`` rows of
    one random tree, root first."""
    rows: list[tuple] = []

    def grow(level: int) -> int:
        node = len(rows)
        rows.append(())
        if level == depth or (level > 0 and generator.random() < 0.2):
            rows[node] = (node, 0, "LEAF", 0.0, 0, 0, 0)
            return node
        feature, mode = int(generator.integers(features)), str(generator.choice(modes))
        threshold = float(generator.integers(-4, 5)) / 4
        children = grow(level + 1), grow(level + 1)
        rows[node] = (node, feature, mode, threshold, *children, int(generator.random() < 0.5))
        return node

    grow(0)
    return rows


def grid_inputs(rows: int, features: int, dtype=F32, seed: int = 1) -> np.ndarray:
    """Inputs on the thresholds' grid, with some NaN."""
    generator = np.random.default_rng(seed)
    x = (generator.integers(-5, 6, (rows, features)) / 4).astype(dtype)
    x[generator.random(x.shape) < 0.1] = np.nan
    return x


def leaf_weights(
    leaves, targets: int, kind: str, per_leaf: int = 1, signs: str = "mixed", seed: int = 2
) -> dict:
    """``{kind}_treeids/nodeids/ids/weights`` giving each leaf ``per_leaf`` weighted targets."""
    generator = np.random.default_rng(seed)
    pairs = [
        (tree, node, int(target))
        for tree, node in leaves
        for target in generator.permutation(targets)[:per_leaf]
    ]
    weights = generator.uniform(0 if signs == "positive" else -1, 1, len(pairs)).round(3)
    return {
        f"{kind}_treeids": [tree for tree, _, _ in pairs],
        f"{kind}_nodeids": [node for _, node, _ in pairs],
        f"{kind}_ids": [target for _, _, target in pairs],
        f"{kind}_weights": weights.tolist(),
    }


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize(
    ("targets", "transform"), [(1, "NONE"), (1, "LOGISTIC"), (3, "NONE"), (3, "SOFTMAX")]
)
@pytest.mark.parametrize("base", [False, True])
def test_tree_ensemble_regressor(check, aggregate, targets, transform, base):
    nodes, leaves = random_forest(trees=5, depth=4, features=3, modes=LEGACY_MODES)
    attrs = {**nodes, **leaf_weights(leaves, targets, "target")}
    if base:
        attrs["base_values"] = [0.5, -0.25, 1.0][:targets]
    x = grid_inputs(40, 3)
    model = ml_model(
        "TreeEnsembleRegressor",
        {"x": x},
        n_targets=targets,
        aggregate_function=aggregate,
        post_transform=transform,
        **attrs,
    )
    check(model, {"x": x}, **SCORES)


def test_tree_ensemble_regressor_double_input(check):
    nodes, leaves = random_forest(trees=3, depth=3, features=2, modes=LEGACY_MODES)
    x = grid_inputs(30, 2, F64)
    attrs = {**nodes, **leaf_weights(leaves, 1, "target")}
    check(ml_model("TreeEnsembleRegressor", {"x": x}, n_targets=1, **attrs), {"x": x}, **SCORES)


def test_tree_ensemble_regressor_double_attributes(check):
    """Version 3 takes thresholds, weights and base values as double tensors."""
    nodes, leaves = random_forest(trees=4, depth=3, features=2)
    weights = leaf_weights(leaves, 2, "target")
    attrs = {**nodes, **weights, "n_targets": 2}
    attrs["nodes_values_as_tensor"] = tensor(attrs.pop("nodes_values"), F64)
    attrs["target_weights_as_tensor"] = tensor(attrs.pop("target_weights"), F64)
    attrs["base_values_as_tensor"] = tensor([0.1, 0.2], F64)
    x = grid_inputs(30, 2, F64)
    check(ml_model("TreeEnsembleRegressor", {"x": x}, version=3, **attrs), {"x": x}, **SCORES)


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("base", [False, True])
@pytest.mark.parametrize(
    "labels", [{"classlabels_int64s": [4, 5, 6, 7]}, {"classlabels_strings": list("abcd")}]
)
def test_tree_ensemble_classifier(check, transform, base, labels):
    nodes, leaves = random_forest(trees=6, depth=4, features=3, modes=LEGACY_MODES)
    attrs = {**nodes, **leaf_weights(leaves, 4, "class", per_leaf=3, signs="positive"), **labels}
    if base:
        attrs["base_values"] = [0.1, 0.2, -0.1, 0.0]
    x = grid_inputs(40, 3)
    check(
        ml_model("TreeEnsembleClassifier", {"x": x}, outputs=2, post_transform=transform, **attrs),
        {"x": x},
        **SCORES,
    )


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX"])
@pytest.mark.parametrize("signs", ["positive", "mixed"])
@pytest.mark.parametrize(("scored", "base"), [(0, []), (0, [0.25]), (1, [])])
def test_tree_ensemble_classifier_binary(check, transform, signs, scored, base):
    """Two classes, weights for one: how converters write binary random forests and boosted trees."""
    nodes, leaves = random_forest(trees=4, depth=3, features=2)
    weights = leaf_weights(leaves, 1, "class", signs=signs)
    weights["class_ids"] = [scored] * len(weights["class_ids"])
    attrs = {**nodes, **weights, "classlabels_int64s": [0, 1], "post_transform": transform}
    if base:
        attrs["base_values"] = base
    x = grid_inputs(40, 2)
    check(ml_model("TreeEnsembleClassifier", {"x": x}, outputs=2, **attrs), {"x": x}, **SCORES)


def test_tree_ensemble_classifier_two_classes_both_weighted():
    """Weights for both of two classes: the top class wins (onnxruntime answers 1 whenever
    the second class scores above 0, whatever the labels)."""
    nodes, leaves = random_forest(trees=4, depth=3, features=2)
    attrs = {
        **nodes,
        **leaf_weights(leaves, 2, "class", per_leaf=2, signs="positive"),
        "classlabels_int64s": [3, 8],
    }
    x = grid_inputs(40, 2)
    check_reference(ml_model("TreeEnsembleClassifier", {"x": x}, outputs=2, **attrs), {"x": x})


def test_tree_ensemble_refusals():
    nodes, leaves = random_forest(trees=2, depth=2, features=2)
    x = grid_inputs(2, 2)
    binary = {**nodes, **leaf_weights(leaves, 1, "class"), "classlabels_int64s": [0, 1]}
    assert "PROBIT" in refused(
        ml_model("TreeEnsembleClassifier", {"x": x}, outputs=2, post_transform="PROBIT", **binary)
    )
    assert "base_values" in refused(
        ml_model("TreeEnsembleClassifier", {"x": x}, outputs=2, base_values=[0.1, 0.2], **binary)
    )
    cyclic = {**nodes, **leaf_weights(leaves, 1, "target")}
    cyclic["nodes_truenodeids"] = [0] * len(cyclic["nodes_truenodeids"])
    assert "cycle" in refused(ml_model("TreeEnsembleRegressor", {"x": x}, n_targets=1, **cyclic))
    dangling = {**nodes, **leaf_weights(leaves, 1, "target")}
    dangling["nodes_falsenodeids"] = [99] * len(dangling["nodes_falsenodeids"])
    assert "not in its tree" in refused(ml_model("TreeEnsembleRegressor", {"x": x}, n_targets=1, **dangling))


def tree_ensemble_attrs(trees: int, depth: int, features: int, targets: int, dtype, seed: int = 3) -> dict:
    """Attributes of a random TreeEnsemble (version 5) with every branch mode, set membership
    on the thresholds' grid included."""
    generator = np.random.default_rng(seed)
    nodes = {key: [] for key in ("featureids", "modes", "splits", "truenodeids", "trueleafs")}
    nodes |= {"falsenodeids": [], "falseleafs": [], "missing_value_tracks_true": []}
    leaves, members, roots = {"targetids": [], "weights": []}, [], []

    def grow(level: int) -> tuple[int, int]:
        if level == depth or (level > 0 and generator.random() < 0.2):
            leaves["targetids"].append(int(generator.integers(targets)))
            leaves["weights"].append(round(float(generator.uniform(-1, 1)), 3))
            return len(leaves["weights"]) - 1, 1
        index = len(nodes["modes"])
        mode = int(generator.integers(7))
        for key, value in zip(
            nodes, (int(generator.integers(features)), mode, generator.integers(-4, 5) / 4), strict=False
        ):
            nodes[key].append(value)
        if mode == 6:
            members.extend([*generator.choice([-1.0, 0.0, 1.0], 2, replace=False), np.nan])
        for key in ("truenodeids", "trueleafs", "falsenodeids", "falseleafs", "missing_value_tracks_true"):
            nodes[key].append(0)
        for side in ("true", "false"):
            child, is_leaf = grow(level + 1)
            nodes[f"{side}nodeids"][index], nodes[f"{side}leafs"][index] = child, is_leaf
        nodes["missing_value_tracks_true"][index] = int(generator.random() < 0.5)
        return index, 0

    for _ in range(trees):
        roots.append(grow(0)[0])
    attrs = {f"nodes_{key}": value for key, value in nodes.items()}
    attrs["nodes_modes"] = tensor(attrs["nodes_modes"], np.uint8)
    attrs["nodes_splits"] = tensor(attrs["nodes_splits"], dtype)
    attrs |= {"leaf_targetids": leaves["targetids"], "leaf_weights": tensor(leaves["weights"], dtype)}
    attrs |= {"tree_roots": roots, "n_targets": targets}
    if members:
        attrs["membership_values"] = tensor(members, dtype)
    return attrs


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
@pytest.mark.parametrize(("targets", "transform"), [(1, 0), (1, 4), (3, 0), (3, 1), (3, 2), (3, 3)])
def test_tree_ensemble(check, dtype, aggregate, targets, transform):
    """Inputs are whole numbers: onnxruntime rounds others in set-membership tests its own way.
    It also reads post_transform 1 as LOGISTIC and 2 as SOFTMAX, against the specification
    (1 is SOFTMAX, 2 LOGISTIC), so its answer for the other code is the reference there (the
    reference evaluator ignores post_transform)."""
    attrs = tree_ensemble_attrs(trees=5, depth=4, features=3, targets=targets, dtype=dtype)
    x = np.round(grid_inputs(50, 3, dtype))

    def model(code: int) -> onnx.ModelProto:
        return ml_model(
            "TreeEnsemble", {"x": x}, version=5, aggregate_function=aggregate, post_transform=code, **attrs
        )

    ours = spawnml.InferenceSession(model(transform).SerializeToString()).run(None, {"x": x})
    onnxruntime_code = {1: 2, 2: 1}.get(transform, transform)
    session = onnxruntime.InferenceSession(
        model(onnxruntime_code).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    assert_close(ours, session.run(None, {"x": x}), **SCORES)


# Support vector machines -----------------------------------------------------------------------

SVM_KERNELS = [
    ("LINEAR", [0.0, 0.0, 0.0]),
    ("POLY", [0.5, 1.0, 3.0]),
    ("RBF", [0.4, 0.0, 0.0]),
    ("SIGMOID", [0.3, -0.2, 0.0]),
]


def svm_classifier_attrs(classes: int, per_class: int, features: int, kernel, probabilities: bool) -> dict:
    generator = np.random.default_rng(classes * 10 + per_class)
    vectors = classes * per_class
    attrs = {
        "kernel_type": kernel[0],
        "kernel_params": kernel[1],
        "vectors_per_class": [per_class] * classes,
        "support_vectors": generator.standard_normal(vectors * features).round(3).tolist(),
        "coefficients": generator.uniform(-1, 1, (classes - 1) * vectors).round(3).tolist(),
        "rho": generator.uniform(-0.5, 0.5, classes * (classes - 1) // 2).round(3).tolist(),
        "classlabels_ints": list(range(10, 10 + classes)),
    }
    if probabilities:
        attrs["prob_a"] = generator.uniform(-3, -1, len(attrs["rho"])).round(3).tolist()
        attrs["prob_b"] = generator.uniform(-0.3, 0.3, len(attrs["rho"])).round(3).tolist()
    return attrs


@pytest.mark.parametrize("kernel", SVM_KERNELS, ids=lambda kernel: kernel[0])
@pytest.mark.parametrize("classes", [2, 3, 4])
@pytest.mark.parametrize("probabilities", [False, True])
@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX"])
def test_svm_classifier(check, kernel, classes, probabilities, transform):
    x = rng.standard_normal((8, 3)).astype(F32)
    attrs = svm_classifier_attrs(classes, 3, 3, kernel, probabilities)
    check(
        ml_model("SVMClassifier", {"x": x}, outputs=2, post_transform=transform, **attrs), {"x": x}, **SCORES
    )


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("transform", ["NONE", "SOFTMAX"])
def test_svm_classifier_linear(check, classes, transform):
    x = rng.standard_normal((8, 3)).astype(F32)
    attrs = {
        "coefficients": rng.uniform(-1, 1, 3 * classes).round(3).tolist(),
        "rho": [0.1],
        "kernel_params": [0.0, 0.0, 0.0],
    }
    attrs |= {"classlabels_strings": list("abcd")[:classes], "post_transform": transform}
    check(ml_model("SVMClassifier", {"x": x}, outputs=2, **attrs), {"x": x}, **SCORES)


@pytest.mark.parametrize("kernel", SVM_KERNELS, ids=lambda kernel: kernel[0])
@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor(check, kernel, one_class):
    x = rng.standard_normal((8, 3)).astype(F32)
    attrs = {"kernel_type": kernel[0], "kernel_params": kernel[1], "n_supports": 4, "one_class": one_class}
    attrs |= {"support_vectors": rng.standard_normal(12).round(3).tolist(), "rho": [0.2]}
    attrs["coefficients"] = rng.uniform(-1, 1, 4).round(3).tolist()
    check(ml_model("SVMRegressor", {"x": x}, **attrs), {"x": x}, **SCORES)


def test_svm_regressor_linear(check):
    x = rng.standard_normal((8, 3)).astype(F32)
    attrs = {"coefficients": [0.5, -0.25, 1.0], "rho": [0.2], "kernel_params": [0.0, 0.0, 0.0]}
    check(ml_model("SVMRegressor", {"x": x}, **attrs), {"x": x}, **SCORES)
