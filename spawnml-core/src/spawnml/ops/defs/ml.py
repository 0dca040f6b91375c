"""Operators of the ai.onnx.ml domain: feature transforms, encoders, linear models,
support vector machines and tree ensembles. ZipMap, DictVectorizer and CastMap, which
take or give maps and sequences, are not defined."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...dtypes import STRING
from ...ir import Dim, Shape
from ..schema import REQUIRED, Attribute, InferenceContext, OpSchema, TensorType
from ..shapes import dims_product, same_as_input

ML = "ai.onnx.ml"
INT64 = np.dtype(np.int64)
FLOAT32 = np.dtype(np.float32)
InferFn = Callable[[InferenceContext], list[TensorType]]


def _input(ctx: InferenceContext, index: int = 0) -> TensorType:
    return ctx.input(index) or TensorType(None, None)


def _rows(shape: Shape) -> Dim:
    """The batch size of an ``[N, ...]`` input; a vector is one row."""
    if shape is None:
        return None
    return shape[0] if len(shape) >= 2 else 1


def _same_shape(dtype: np.dtype) -> InferFn:
    def infer(ctx: InferenceContext) -> list[TensorType]:
        return [TensorType(dtype, _input(ctx).shape)]

    return infer


def _batch_of(columns: Callable[[dict], Dim], dtype: np.dtype | None = FLOAT32) -> InferFn:
    """Infer ``[N, columns(attrs)]``; ``dtype`` None takes the input's."""

    def infer(ctx: InferenceContext) -> list[TensorType]:
        x = _input(ctx)
        return [TensorType(dtype or x.dtype, (_rows(x.shape), columns(ctx.attrs)))]

    return infer


def _labels_dtype(attrs: dict, strings: str) -> np.dtype:
    return STRING if attrs.get(strings) else INT64


def _classifier(columns: Callable[[dict], Dim], strings: str) -> InferFn:
    """Infer a classifier: labels ``[N]`` and scores ``[N, columns(attrs)]``."""

    def infer(ctx: InferenceContext) -> list[TensorType]:
        rows = _rows(_input(ctx).shape)
        return [
            TensorType(_labels_dtype(ctx.attrs, strings), (rows,)),
            TensorType(FLOAT32, (rows, columns(ctx.attrs))),
        ]

    return infer


def _infer_array_feature_extractor(ctx: InferenceContext) -> list[TensorType]:
    x, indices = _input(ctx), _input(ctx, 1)
    count = None if indices.shape is None else dims_product(indices.shape)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    leading = x.shape[:-1] if len(x.shape) > 1 else (1,)
    return [TensorType(x.dtype, (*leading, count))]


def _infer_category_mapper(ctx: InferenceContext) -> list[TensorType]:
    x = _input(ctx)
    dtype = None if x.dtype is None else (INT64 if x.dtype == STRING else STRING)
    return [TensorType(dtype, x.shape)]


def _infer_one_hot(ctx: InferenceContext) -> list[TensorType]:
    shape = _input(ctx).shape
    categories = len(ctx.attrs.get("cats_int64s") or ctx.attrs.get("cats_strings") or [])
    return [TensorType(FLOAT32, None if shape is None else (*shape, categories))]


def label_encoder_values(attrs: dict[str, Any]) -> tuple[str, Any] | None:
    """Which attribute holds a LabelEncoder's values, and the values: ``values_tensor``,
    ``values_strings``, ``values_int64s`` or ``values_floats`` (``classes_strings`` in v1)."""
    for name in ("values_tensor", "values_strings", "values_int64s", "values_floats"):
        if attrs.get(name) is not None:
            return name, attrs[name]
    return None


def _infer_label_encoder(ctx: InferenceContext) -> list[TensorType]:
    x = _input(ctx)
    found = label_encoder_values(ctx.attrs)
    if ctx.opset < 2 or found is None:
        dtype = None if x.dtype is None else (INT64 if x.dtype == STRING else STRING)
    else:
        name, values = found
        kinds = {"values_strings": STRING, "values_int64s": INT64, "values_floats": FLOAT32}
        dtype = values.dtype if name == "values_tensor" else kinds[name]
    return [TensorType(dtype, x.shape)]


def _linear_classes(attrs: dict) -> int:
    """Score columns of a LinearClassifier: one per class, two for a one-score binary model."""
    classes = len(attrs.get("intercepts") or [])
    return 2 if classes == 1 else classes


def _tree_targets(attrs: dict) -> Dim:
    return attrs.get("n_targets")


def _tree_classes(attrs: dict) -> int:
    return len(attrs.get("classlabels_int64s") or attrs.get("classlabels_strings") or [])


_POST_TRANSFORM = Attribute("post_transform", "string", "NONE")
_TREE_NODES = (
    Attribute("nodes_treeids", "ints"),
    Attribute("nodes_nodeids", "ints"),
    Attribute("nodes_featureids", "ints"),
    Attribute("nodes_modes", "strings"),
    Attribute("nodes_values", "floats"),
    Attribute("nodes_truenodeids", "ints"),
    Attribute("nodes_falsenodeids", "ints"),
    Attribute("nodes_missing_value_tracks_true", "ints"),
    Attribute("nodes_hitrates", "floats"),
    Attribute("base_values", "floats"),
    _POST_TRANSFORM,
)
_TREE_TENSORS = (
    Attribute("nodes_values_as_tensor", "tensor"),
    Attribute("nodes_hitrates_as_tensor", "tensor"),
    Attribute("base_values_as_tensor", "tensor"),
)
_CLASS_LEAVES = (
    Attribute("classlabels_int64s", "ints"),
    Attribute("classlabels_strings", "strings"),
    Attribute("class_treeids", "ints"),
    Attribute("class_nodeids", "ints"),
    Attribute("class_ids", "ints"),
    Attribute("class_weights", "floats"),
)
_TARGET_LEAVES = (
    Attribute("n_targets", "int"),
    Attribute("aggregate_function", "string", "SUM"),
    Attribute("target_treeids", "ints"),
    Attribute("target_nodeids", "ints"),
    Attribute("target_ids", "ints"),
    Attribute("target_weights", "floats"),
)
_SVM = (
    Attribute("kernel_type", "string", "LINEAR"),
    Attribute("kernel_params", "floats"),
    Attribute("coefficients", "floats"),
    Attribute("support_vectors", "floats"),
    Attribute("rho", "floats"),
    _POST_TRANSFORM,
)
_LABEL_ENCODER_2 = (
    Attribute("keys_strings", "strings"),
    Attribute("keys_int64s", "ints"),
    Attribute("keys_floats", "floats"),
    Attribute("values_strings", "strings"),
    Attribute("values_int64s", "ints"),
    Attribute("values_floats", "floats"),
    Attribute("default_string", "string", "_Unused"),
    Attribute("default_int64", "int", -1),
    Attribute("default_float", "float", -0.0),
)


def _ml(
    name: str,
    infer: InferFn,
    *attributes: Attribute,
    since: int = 1,
    inputs: tuple[int, int] = (1, 1),
    outputs: tuple[int, int] = (1, 1),
) -> OpSchema:
    return OpSchema(name, ML, since, inputs=inputs, outputs=outputs, attributes=attributes, infer=infer)


SCHEMAS: list[OpSchema] = [
    _ml("ArrayFeatureExtractor", _infer_array_feature_extractor, inputs=(2, 2)),
    _ml("Binarizer", same_as_input(), Attribute("threshold", "float", 0.0)),
    _ml(
        "CategoryMapper",
        _infer_category_mapper,
        Attribute("cats_int64s", "ints"),
        Attribute("cats_strings", "strings"),
        Attribute("default_int64", "int", -1),
        Attribute("default_string", "string", "_Unused"),
    ),
    _ml(
        "FeatureVectorizer",
        _batch_of(lambda attrs: sum(attrs.get("inputdimensions") or [])),
        Attribute("inputdimensions", "ints"),
        inputs=(1, -1),
    ),
    _ml(
        "Imputer",
        same_as_input(),
        Attribute("imputed_value_floats", "floats"),
        Attribute("imputed_value_int64s", "ints"),
        Attribute("replaced_value_float", "float", 0.0),
        Attribute("replaced_value_int64", "int", 0),
    ),
    _ml(
        "LabelEncoder",
        _infer_label_encoder,
        Attribute("classes_strings", "strings"),
        Attribute("default_int64", "int", -1),
        Attribute("default_string", "string", "_Unused"),
    ),
    _ml("LabelEncoder", _infer_label_encoder, *_LABEL_ENCODER_2, since=2),
    _ml(
        "LabelEncoder",
        _infer_label_encoder,
        *_LABEL_ENCODER_2,
        Attribute("keys_tensor", "tensor"),
        Attribute("values_tensor", "tensor"),
        Attribute("default_tensor", "tensor"),
        since=4,
    ),
    _ml(
        "LinearClassifier",
        _classifier(_linear_classes, "classlabels_strings"),
        Attribute("coefficients", "floats", REQUIRED),
        Attribute("intercepts", "floats"),
        Attribute("classlabels_ints", "ints"),
        Attribute("classlabels_strings", "strings"),
        Attribute("multi_class", "int", 0),
        _POST_TRANSFORM,
        outputs=(2, 2),
    ),
    _ml(
        "LinearRegressor",
        _batch_of(lambda attrs: attrs["targets"]),
        Attribute("coefficients", "floats"),
        Attribute("intercepts", "floats"),
        Attribute("targets", "int", 1),
        _POST_TRANSFORM,
    ),
    _ml("Normalizer", _same_shape(FLOAT32), Attribute("norm", "string", "MAX")),
    _ml(
        "OneHotEncoder",
        _infer_one_hot,
        Attribute("cats_int64s", "ints"),
        Attribute("cats_strings", "strings"),
        Attribute("zeros", "int", 1),
    ),
    _ml("Scaler", _same_shape(FLOAT32), Attribute("scale", "floats"), Attribute("offset", "floats")),
    _ml(
        "SVMClassifier",
        _classifier(lambda attrs: None, "classlabels_strings"),
        *_SVM,
        Attribute("vectors_per_class", "ints"),
        Attribute("prob_a", "floats"),
        Attribute("prob_b", "floats"),
        Attribute("classlabels_ints", "ints"),
        Attribute("classlabels_strings", "strings"),
        outputs=(2, 2),
    ),
    _ml(
        "SVMRegressor",
        _batch_of(lambda attrs: 1),
        *_SVM,
        Attribute("n_supports", "int", 0),
        Attribute("one_class", "int", 0),
    ),
    *(
        _ml(
            "TreeEnsembleClassifier",
            _classifier(_tree_classes, "classlabels_strings"),
            *_TREE_NODES,
            *_CLASS_LEAVES,
            *extra,
            since=version,
            outputs=(2, 2),
        )
        for version, extra in ((1, ()), (3, (*_TREE_TENSORS, Attribute("class_weights_as_tensor", "tensor"))))
    ),
    *(
        _ml(
            "TreeEnsembleRegressor",
            _batch_of(_tree_targets),
            *_TREE_NODES,
            *_TARGET_LEAVES,
            *extra,
            since=version,
        )
        for version, extra in (
            (1, ()),
            (3, (*_TREE_TENSORS, Attribute("target_weights_as_tensor", "tensor"))),
        )
    ),
    _ml(
        "TreeEnsemble",
        _batch_of(_tree_targets, dtype=None),
        Attribute("tree_roots", "ints", REQUIRED),
        Attribute("nodes_featureids", "ints", REQUIRED),
        Attribute("nodes_splits", "tensor", REQUIRED),
        Attribute("nodes_modes", "tensor", REQUIRED),
        Attribute("nodes_truenodeids", "ints", REQUIRED),
        Attribute("nodes_trueleafs", "ints", REQUIRED),
        Attribute("nodes_falsenodeids", "ints", REQUIRED),
        Attribute("nodes_falseleafs", "ints", REQUIRED),
        Attribute("nodes_missing_value_tracks_true", "ints"),
        Attribute("nodes_hitrates", "tensor"),
        Attribute("membership_values", "tensor"),
        Attribute("leaf_targetids", "ints", REQUIRED),
        Attribute("leaf_weights", "tensor", REQUIRED),
        Attribute("n_targets", "int"),
        Attribute("aggregate_function", "int", 1),
        Attribute("post_transform", "int", 0),
        since=5,
    ),
]
