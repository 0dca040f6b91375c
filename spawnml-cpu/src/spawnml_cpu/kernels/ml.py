"""CPU kernels of the ai.onnx.ml operators.

Where the specification leaves a choice open, the kernels do what onnxruntime does: scores
are float32, post transforms use its formulas (PROBIT with Winitzki's approximation of the
inverse error function), a one-score model (one target, or a binary classifier scoring one
class) applies only PROBIT, and a binary classifier with one score per row reports the
opposite score for the other class. Configurations onnxruntime answers inconsistently are
refused at load.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from spawnml import dtypes
from spawnml.backend import KernelContext
from spawnml.ir import Node
from spawnml.ops.defs.ml import label_encoder_values

from .table import KERNELS
from .threads import one_blas_thread

ML = "ai.onnx.ml"
Array = np.ndarray
Attrs = dict[str, Any]
Check = Callable[[Node, int], "str | None"]
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
INT64 = np.dtype(np.int64)


def _register(
    name: str, check: Check | None = None, since: int = 1, until: int | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return KERNELS.register(name, domain=ML, since=since, until=until, check=check)


def _rows(x: Array) -> Array:
    """``x`` as an ``[N, C]`` matrix: a vector is one row, higher ranks keep their first axis."""
    return x.reshape(1, -1) if x.ndim < 2 else x.reshape(x.shape[0], -1)


def _real(x: Array) -> Array:
    """``x`` as float64 when it is float64, else as float32 (the type onnxruntime computes in)."""
    return x.astype(FLOAT64 if x.dtype == FLOAT64 else FLOAT32, copy=False)


def _per_feature(values: Sequence[float] | None, width: int, what: str, default: float) -> Array:
    """One value per feature, from a list of one value or of ``width`` values."""
    if not values:
        return np.full(width, default)
    if len(values) not in (1, width):
        raise ValueError(f"{what} has {len(values)} values for {width} features")
    return np.broadcast_to(np.asarray(values), (width,))


# Post transforms ---------------------------------------------------------------------------


def _logistic(scores: Array) -> Array:
    positive = 1 / (1 + np.exp(-np.abs(scores)))
    return np.where(scores < 0, 1 - positive, positive)


def _softmax(scores: Array) -> Array:
    exp = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


def _softmax_zero(scores: Array) -> Array:
    """Softmax over the entries that are not (almost) zero; those stay (almost) zero."""
    top = scores.max(axis=-1, keepdims=True)
    kept = np.abs(scores) > 1e-7
    exp = np.where(kept, np.exp(scores - top), scores * np.exp(-top))
    return exp / np.where(kept, exp, 0).sum(axis=-1, keepdims=True)


def _probit(scores: Array) -> Array:
    """``sqrt(2) * erfinv(2p - 1)``, with onnxruntime's approximation of erfinv (Winitzki,
    a = 0.147), evaluated step by step in float32 as it does: near p = 0.5 it is ill-conditioned."""
    one, a = np.float32(1), np.float32(0.147)
    x = np.float32(2) * scores.astype(FLOAT32) - one
    log = np.log((one - x) * (one + x))
    v = np.float32(2) / (np.float32(3.14159) * a) + np.float32(0.5) * log
    inner = np.sqrt(-v + np.sqrt(v * v - one / a * log))
    return np.float32(1.41421356) * np.where(x < 0, -inner, inner)


_TRANSFORMS: dict[str, Callable[[Array], Array]] = {
    "NONE": lambda scores: scores,
    "LOGISTIC": _logistic,
    "SOFTMAX": _softmax,
    "SOFTMAX_ZERO": _softmax_zero,
    "PROBIT": _probit,
}


def _transform(scores: Array, name: str, dtype: np.dtype = FLOAT32) -> Array:
    """Apply a post transform to ``[N, K]`` scores; with one score per row only PROBIT applies."""
    scores = scores.astype(dtype)
    with np.errstate(all="ignore"):
        if scores.shape[-1] == 1 and name != "PROBIT":
            return scores
        return _TRANSFORMS[name](scores).astype(dtype)


def _binary_scores(score: Array, name: str, symmetric: bool) -> Array:
    """``[N, 2]`` scores from one score per row: ``[1 - s, s]`` (``[-s, s]`` when the weights are
    of mixed sign), or ``[1 - p, p]`` with ``p`` the logistic of ``s``."""
    score = score.astype(FLOAT32)
    with np.errstate(all="ignore"):
        if name == "LOGISTIC":
            positive = _logistic(score)
            return np.stack([1 - positive, positive], axis=-1).astype(FLOAT32)
    other = -score if symmetric else 1 - score
    return np.stack([other, score], axis=-1)


def _check_transform(name: Any, binary_one_score: bool = False) -> str | None:
    if name not in _TRANSFORMS:
        return f"post_transform={name!r} is not one of {list(_TRANSFORMS)}"
    if binary_one_score and name == "PROBIT":
        return "PROBIT on a binary classifier with one score per row leaves the other score undefined"
    return None


def _labels(attrs: Attrs, ints: str, strings: str) -> Array:
    if attrs.get(strings):
        return np.array(attrs[strings], dtype=dtypes.STRING)
    return np.asarray(attrs.get(ints) or [], dtype=INT64)


# Lookups --------------------------------------------------------------------------------------


def _map_values(
    x: Array, keys: Sequence[Any] | Array, values: Array, default: Any, *, first_wins: bool, nan_key: bool
) -> Array:
    """Map every element of ``x`` through ``keys -> values``; unmatched elements get ``default``.

    With ``first_wins`` the first of repeated keys counts, else the last; with ``nan_key`` a NaN
    key matches NaN elements.
    """
    values = np.asarray(values)
    if x.dtype == dtypes.STRING:
        pairs = list(zip(keys, values, strict=True))
        mapping = dict(reversed(pairs) if first_wins else pairs)
        out = np.array([mapping.get(item, default) for item in x.reshape(-1)], dtype=values.dtype)
        return out.reshape(x.shape)
    order = slice(None) if first_wins else slice(None, None, -1)
    keys = np.asarray(keys)[order]
    unique, first = np.unique(keys, return_index=True)
    if not len(unique):
        return np.full(x.shape, default, dtype=values.dtype)
    position = np.minimum(np.searchsorted(unique, x), len(unique) - 1)
    found = unique[position] == x
    out = np.where(found, values[order][first[position]], np.asarray(default, dtype=values.dtype))
    if nan_key and x.dtype.kind == "f" and np.isnan(keys).any():
        out = np.where(np.isnan(x), values[order][np.flatnonzero(np.isnan(keys))[0]], out)
    return out.astype(values.dtype, copy=False)


def _positions(x: Array, categories: Sequence[Any]) -> Array:
    """The index of each element of ``x`` among ``categories`` (the first if repeated), or -1."""
    indexes = np.arange(len(categories), dtype=INT64)
    return _map_values(x, categories, indexes, -1, first_wins=True, nan_key=False)


# Feature transforms ----------------------------------------------------------------------------


@_register("ArrayFeatureExtractor")
def _array_feature_extractor(ctx: KernelContext, x: Array, indices: Array) -> Array:
    """Select entries of the last axis; a vector gives one row."""
    chosen = indices.reshape(-1)
    if not chosen.size or chosen.min() < 0 or chosen.max() >= x.shape[-1]:
        raise ValueError(f"indices {chosen.tolist()} must be non-empty and in [0, {x.shape[-1]})")
    out = np.take(x, chosen, axis=-1)
    return out.reshape(1, -1) if x.ndim == 1 else out


@_register("Binarizer")
def _binarizer(ctx: KernelContext, x: Array) -> Array:
    return (x > ctx.attrs["threshold"]).astype(x.dtype)


@_register("Scaler")
def _scaler(ctx: KernelContext, x: Array) -> Array:
    """``(x - offset) * scale`` along the last axis, as float32."""
    work = _real(x)
    width = x.shape[-1] if x.ndim else 1
    offset = _per_feature(ctx.attrs.get("offset"), width, "offset", 0.0).astype(work.dtype)
    scale = _per_feature(ctx.attrs.get("scale"), width, "scale", 1.0).astype(work.dtype)
    return ((work - offset) * scale).astype(FLOAT32)


_NORMS: dict[str, Callable[[Array], Array]] = {
    "MAX": lambda rows: np.fmax.reduce(rows, axis=1, keepdims=True),
    "L1": lambda rows: np.abs(rows).sum(axis=1, keepdims=True),
    "L2": lambda rows: np.sqrt((rows * rows).sum(axis=1, keepdims=True)),
}


def _check_normalizer(node: Node, opset: int) -> str | None:
    norm = node.attrs.get("norm", "MAX")
    return None if norm in _NORMS else f"norm={norm!r} is not one of {list(_NORMS)}"


@_register("Normalizer", check=_check_normalizer)
def _normalizer(ctx: KernelContext, x: Array) -> Array:
    """Divide each row by its max, L1 or L2 norm; a row whose norm is zero is kept."""
    if x.ndim > 2:
        raise ValueError(f"Normalizer takes a [N, C] or [C] input, got rank {x.ndim}")
    rows = _rows(_real(x))
    with np.errstate(all="ignore"):
        norm = _NORMS[ctx.attrs["norm"]](rows)
        out = np.where(norm != 0, rows / norm, rows)
    return out.astype(FLOAT32).reshape(x.shape)


def _check_imputer(node: Node, opset: int) -> str | None:
    if not node.attrs.get("imputed_value_floats") and not node.attrs.get("imputed_value_int64s"):
        return "imputed_value_floats or imputed_value_int64s must be given"
    return None


@_register("Imputer", check=_check_imputer)
def _imputer(ctx: KernelContext, x: Array) -> Array:
    """Replace ``replaced_value_*`` (NaN matches NaN) by one value or one per feature."""
    integral = x.dtype.kind in "iu"
    attrs = ctx.attrs
    imputed = attrs.get("imputed_value_int64s" if integral else "imputed_value_floats")
    replaced = attrs["replaced_value_int64" if integral else "replaced_value_float"]
    fill = _per_feature(imputed, x.shape[-1] if x.ndim else 1, "imputed values", 0)
    missing = np.isnan(x) if not integral and np.isnan(replaced) else x == replaced
    return np.where(missing, fill.astype(x.dtype), x)


def _check_categories(node: Node, opset: int) -> str | None:
    if bool(node.attrs.get("cats_int64s")) == bool(node.attrs.get("cats_strings")):
        return "exactly one of cats_int64s and cats_strings must be given"
    return None


@_register("OneHotEncoder", check=_check_categories)
def _one_hot_encoder(ctx: KernelContext, x: Array) -> Array:
    """``x.shape + [categories]`` indicators; numbers are truncated to integers first."""
    strings = ctx.attrs.get("cats_strings")
    categories = strings or ctx.attrs["cats_int64s"]
    keys = x if x.dtype == dtypes.STRING else x.astype(INT64)
    if (x.dtype == dtypes.STRING) != bool(strings):
        raise ValueError(f"a {dtypes.name(x.dtype)} input cannot be looked up in these categories")
    found = _positions(keys, categories)
    if not ctx.attrs["zeros"] and (found < 0).any():
        raise ValueError("an input is in no category and zeros=0")
    return (found[..., None] == np.arange(len(categories))).astype(FLOAT32)


def _check_category_mapper(node: Node, opset: int) -> str | None:
    ints, strings = node.attrs.get("cats_int64s") or [], node.attrs.get("cats_strings") or []
    return None if len(ints) == len(strings) else "cats_int64s and cats_strings differ in length"


@_register("CategoryMapper", check=_check_category_mapper)
def _category_mapper(ctx: KernelContext, x: Array) -> Array:
    """Strings to integers or integers to strings through ``cats_*``; the last of repeated keys counts."""
    ints = np.asarray(ctx.attrs.get("cats_int64s") or [], dtype=INT64)
    strings = np.array(ctx.attrs.get("cats_strings") or [], dtype=dtypes.STRING)
    if x.dtype == dtypes.STRING:
        return _map_values(x, strings, ints, ctx.attrs["default_int64"], first_wins=False, nan_key=False)
    return _map_values(x, ints, strings, ctx.attrs["default_string"], first_wins=False, nan_key=False)


@_register("FeatureVectorizer")
def _feature_vectorizer(ctx: KernelContext, *inputs: Array) -> Array:
    """Concatenate the rows of every input, each cut or zero-padded to its ``inputdimensions``."""
    widths = ctx.attrs.get("inputdimensions") or []
    if len(widths) != len(inputs):
        raise ValueError(f"inputdimensions lists {len(widths)} widths for {len(inputs)} inputs")
    parts = []
    for x, width in zip(inputs, widths, strict=True):
        rows = _rows(x)[:, :width].astype(FLOAT32)
        parts.append(np.pad(rows, [(0, 0), (0, width - rows.shape[1])]))
    return np.concatenate(parts, axis=1)


# LabelEncoder ----------------------------------------------------------------------------------

_KEYS = ("keys_tensor", "keys_strings", "keys_int64s", "keys_floats")
_VALUE_TYPES = {"values_strings": dtypes.STRING, "values_int64s": INT64, "values_floats": FLOAT32}
_DEFAULTS = {"O": "default_string", "i": "default_int64", "u": "default_int64", "f": "default_float"}


def _encoder_keys(attrs: Attrs) -> Array | None:
    for name in _KEYS:
        if attrs.get(name) is not None:
            keys = attrs[name]
            if name == "keys_floats":
                return np.asarray(keys, dtype=FLOAT32)
            return np.array(keys, dtype=dtypes.STRING) if name == "keys_strings" else np.asarray(keys)
    return None


def _encoder_values(attrs: Attrs) -> Array:
    found = label_encoder_values(attrs)
    if found is None:  # refused at load by _check_label_encoder
        raise ValueError("LabelEncoder has no values_* attribute")
    name, values = found
    return np.asarray(values) if name == "values_tensor" else np.array(values, dtype=_VALUE_TYPES[name])


def _check_label_encoder(node: Node, opset: int) -> str | None:
    attrs = node.attrs
    if opset < 2:
        return None if attrs.get("classes_strings") is not None else "classes_strings must be given"
    keys, found = _encoder_keys(attrs), label_encoder_values(attrs)
    if keys is None or found is None:
        return "one keys_* and one values_* attribute must be given"
    values = _encoder_values(attrs)
    if len(keys.reshape(-1)) != len(values.reshape(-1)):
        return "keys and values differ in length"
    if values.dtype.kind not in _DEFAULTS:
        return f"values of type {dtypes.name(values.dtype)} are not supported"
    return None


@_register("LabelEncoder", check=_check_label_encoder, until=2)
def _label_encoder_classes(ctx: KernelContext, x: Array) -> Array:
    """Version 1: strings to their index in ``classes_strings``, integers to the class at that index."""
    classes = np.array(ctx.attrs["classes_strings"], dtype=dtypes.STRING)
    if x.dtype == dtypes.STRING:
        indexes = np.arange(len(classes), dtype=INT64)
        return _map_values(x, classes, indexes, ctx.attrs["default_int64"], first_wins=False, nan_key=False)
    inside = (x >= 0) & (x < len(classes))
    picked = classes[np.where(inside, x, 0)] if len(classes) else np.full(x.shape, "", dtype=dtypes.STRING)
    return np.where(inside, picked, ctx.attrs["default_string"]).astype(dtypes.STRING)


@_register("LabelEncoder", check=_check_label_encoder, since=2)
def _label_encoder(ctx: KernelContext, x: Array) -> Array:
    """Map keys to values; unmatched inputs get the default of the values' type. From
    version 4 a NaN key matches NaN inputs."""
    attrs = ctx.attrs
    values = _encoder_values(attrs).reshape(-1)
    default = attrs.get("default_tensor")
    default = attrs[_DEFAULTS[values.dtype.kind]] if default is None else np.asarray(default).reshape(-1)[0]
    given = _encoder_keys(attrs)
    if given is None:  # refused at load by _check_label_encoder
        raise ValueError("LabelEncoder has no keys_* attribute")
    keys = given.reshape(-1)
    if (keys.dtype == dtypes.STRING) != (x.dtype == dtypes.STRING):
        raise ValueError(
            f"a {dtypes.name(x.dtype)} input cannot be looked up in {dtypes.name(keys.dtype)} keys"
        )
    return _map_values(x, keys.astype(x.dtype), values, default, first_wins=True, nan_key=ctx.opset >= 4)


# Linear models ---------------------------------------------------------------------------------


def _linear_scores(attrs: Attrs, x: Array, count: int) -> Array:
    """``[N, count]`` scores ``x @ W.T + intercepts`` in float32, whatever the input type."""
    rows = _rows(x).astype(FLOAT32)
    weights = np.asarray(attrs["coefficients"], dtype=FLOAT32).reshape(count, -1)
    if weights.shape[1] != rows.shape[1]:
        raise ValueError(f"the model has {weights.shape[1]} coefficients per row, the input {rows.shape[1]}")
    return rows @ weights.T + np.asarray(attrs.get("intercepts") or np.zeros(count), dtype=FLOAT32)


def _check_linear_classifier(node: Node, opset: int) -> str | None:
    attrs = node.attrs
    classes = len(attrs.get("intercepts") or [])
    labels = len(attrs.get("classlabels_ints") or attrs.get("classlabels_strings") or [])
    if not classes or len(attrs.get("coefficients", [])) % classes:
        return "intercepts must give one value per class, and coefficients a whole row per class"
    if labels != (2 if classes == 1 else classes):
        return f"{labels} class labels for {classes} rows of coefficients"
    return _check_transform(attrs.get("post_transform", "NONE"), binary_one_score=classes == 1)


@_register("LinearClassifier", check=_check_linear_classifier)
def _linear_classifier(ctx: KernelContext, x: Array) -> tuple[Array, Array]:
    """The top class and the class scores; one row of coefficients scores a binary model."""
    attrs = ctx.attrs
    labels = _labels(attrs, "classlabels_ints", "classlabels_strings")
    scores = _linear_scores(attrs, x, len(attrs["intercepts"]))
    if scores.shape[1] == 1:
        score = scores[:, 0]
        return labels[(score > 0).astype(INT64)], _binary_scores(score, attrs["post_transform"], False)
    return labels[scores.argmax(axis=1)], _transform(scores, attrs["post_transform"])


def _check_linear_regressor(node: Node, opset: int) -> str | None:
    targets = node.attrs.get("targets", 1)
    if targets < 1 or len(node.attrs.get("coefficients", [])) % targets:
        return "coefficients must give a whole row per target"
    return _check_transform(node.attrs.get("post_transform", "NONE"))


@_register("LinearRegressor", check=_check_linear_regressor)
def _linear_regressor(ctx: KernelContext, x: Array) -> Array:
    return _transform(_linear_scores(ctx.attrs, x, ctx.attrs["targets"]), ctx.attrs["post_transform"])


# Support vector machines ---------------------------------------------------------------------

_SVM_KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")


def _svm_kernel(attrs: Attrs, x: Array, vectors: Array) -> Array:
    """``[N, V]`` kernel values of every row against every vector, in float32.

    ``kernel_params`` are ``[gamma, coef0, degree]``: POLY is ``(gamma * x.v + coef0) ** degree``,
    RBF ``exp(-gamma * |x - v|^2)``, SIGMOID ``tanh(gamma * x.v + coef0)``.
    """
    gamma, coef0, degree = (np.float32(value) for value in [*(attrs.get("kernel_params") or []), 0, 0, 0][:3])
    kind = attrs["kernel_type"]
    if kind == "RBF":
        difference = x[:, None, :] - vectors[None, :, :]
        return np.exp(-gamma * (difference * difference).sum(axis=-1))
    dot = x @ vectors.T
    if kind == "POLY":
        return (gamma * dot + coef0) ** degree
    return np.tanh(gamma * dot + coef0) if kind == "SIGMOID" else dot


def _svm_rows(x: Array, features: int) -> Array:
    rows = _rows(x).astype(FLOAT32)
    if rows.shape[1] != features:
        raise ValueError(f"the model has {features} features, the input {rows.shape[1]}")
    return rows


def _check_svm(node: Node, binary_one_score: bool = False) -> str | None:
    attrs = node.attrs
    if attrs.get("kernel_type", "LINEAR") not in _SVM_KERNELS:
        return f"kernel_type must be one of {list(_SVM_KERNELS)}"
    if not attrs.get("coefficients") or not attrs.get("rho"):
        return "coefficients and rho must be given"
    if len(attrs.get("kernel_params") or [0] * 3) != 3:
        return "kernel_params must be gamma, coef0 and degree"
    return _check_transform(attrs.get("post_transform", "NONE"), binary_one_score)


def _check_svm_classifier(node: Node, opset: int) -> str | None:
    attrs = node.attrs
    classes = len(attrs.get("classlabels_ints") or attrs.get("classlabels_strings") or [])
    per_class = attrs.get("vectors_per_class") or []
    vectors = sum(per_class)
    if classes < 2 or len(attrs.get("prob_a") or []) != len(attrs.get("prob_b") or []):
        return "two or more class labels, and as many prob_a as prob_b, must be given"
    if vectors and (len(per_class) != classes or len(attrs.get("support_vectors", [])) % vectors):
        return "vectors_per_class must count the support vectors of every class"
    pairs = classes * (classes - 1) // 2
    if vectors and (
        len(attrs["coefficients"]) != (classes - 1) * vectors or len(attrs.get("rho", [])) != pairs
    ):
        return f"{classes} classes need {classes - 1} coefficients per support vector and {pairs} rho"
    if not vectors and len(attrs.get("coefficients", [])) % classes:
        return "a linear SVM needs a row of coefficients per class"
    return _check_svm(node, binary_one_score=classes == 2 and bool(vectors) and not attrs.get("prob_a"))


def _pairwise_decisions(attrs: Attrs, kernels: Array, classes: int) -> Array:
    """``[N, pairs]`` one-against-one decision values (class ``i`` against ``j > i``); positive
    votes for ``i``."""
    counts = np.asarray(attrs["vectors_per_class"])
    starts = np.concatenate([[0], np.cumsum(counts)])
    coefficients = np.asarray(attrs["coefficients"], dtype=FLOAT32).reshape(classes - 1, -1)
    rho = np.asarray(attrs["rho"], dtype=FLOAT32)
    decisions: list[Array] = []
    for i, j in itertools.combinations(range(classes), 2):
        own, other = slice(starts[i], starts[i + 1]), slice(starts[j], starts[j + 1])
        with one_blas_thread():  # matrix-vector products (see .threads)
            total = kernels[:, own] @ coefficients[j - 1, own] + kernels[:, other] @ coefficients[i, other]
        decisions.append(total.astype(np.float64) + rho[len(decisions)])
    return np.stack(decisions, axis=1).astype(FLOAT32)


def _votes(decisions: Array, classes: int) -> Array:
    """The class with the most one-against-one wins (the first on a tie)."""
    votes = np.zeros((decisions.shape[0], classes), dtype=INT64)
    for column, (i, j) in enumerate(itertools.combinations(range(classes), 2)):
        winner = np.where(decisions[:, column] > 0, i, j)
        np.add.at(votes, (np.arange(len(winner)), winner), 1)
    return votes.argmax(axis=1)


def _coupled_probabilities(decisions: Array, attrs: Attrs, classes: int) -> Array:
    """Class probabilities from Platt-scaled pairwise probabilities, coupled as in Wu, Lin and
    Weng (2004), iterating at most 100 times in float32 like libsvm."""
    a = np.asarray(attrs["prob_a"], dtype=FLOAT32)
    b = np.asarray(attrs["prob_b"], dtype=FLOAT32)
    pairwise = np.clip(1 - _logistic(decisions * a + b), np.float32(1e-7), np.float32(1 - 1e-7))
    return np.stack([_couple(row, classes) for row in pairwise]).astype(FLOAT32)


def _couple(pairwise: Array, classes: int) -> Array:
    r = np.zeros((classes, classes), dtype=FLOAT32)
    upper = np.triu_indices(classes, 1)
    r[upper] = pairwise
    r[upper[::-1]] = 1 - pairwise
    q = -r.T * r
    np.fill_diagonal(q, (r * r).sum(axis=0) - np.diagonal(r) ** 2)
    p = np.full(classes, np.float32(1 / classes), dtype=FLOAT32)
    tolerance = np.float32(0.005 / classes)
    for _ in range(100):
        qp = q @ p
        pqp = p @ qp
        if np.abs(qp - pqp).max() < tolerance:
            break
        for t in range(classes):
            step = (pqp - qp[t]) / q[t, t]
            p[t] += step
            pqp = (pqp + step * (step * q[t, t] + 2 * qp[t])) / (1 + step) / (1 + step)
            qp = (qp + step * q[t]) / (1 + step)
            p /= 1 + step
    return p


def _linear_svm_labels(scores: Array, labels: Array, weights: Array) -> Array:
    """The top class; with two classes the second wins whenever the top score exceeds 0.5
    (all weights positive) or 0 (mixed weights)."""
    top = scores.argmax(axis=1)
    if len(labels) == 2:
        best = scores.max(axis=1)
        top = np.where(best >= 0.5 if (weights >= 0).all() else best > 0, 1, top)
    return labels[top]


@_register("SVMClassifier", check=_check_svm_classifier)
def _svm_classifier(ctx: KernelContext, x: Array) -> tuple[Array, Array]:
    """The class with the most one-against-one votes and the decision values (coupled
    probabilities when ``prob_a`` is given) of a kernel SVM, or the top class and the class
    scores of a linear one."""
    attrs = ctx.attrs
    labels = _labels(attrs, "classlabels_ints", "classlabels_strings")
    classes = len(labels)
    if not attrs.get("vectors_per_class") or not sum(attrs["vectors_per_class"]):
        weights = np.asarray(attrs["coefficients"], dtype=FLOAT32).reshape(classes, -1)
        scores = _svm_rows(x, weights.shape[1]) @ weights.T + np.float32(attrs["rho"][0])
        return _linear_svm_labels(scores, labels, weights), _transform(scores, attrs["post_transform"])
    vectors = np.asarray(attrs["support_vectors"], dtype=FLOAT32).reshape(sum(attrs["vectors_per_class"]), -1)
    decisions = _pairwise_decisions(
        attrs, _svm_kernel(attrs, _svm_rows(x, vectors.shape[1]), vectors), classes
    )
    winners = labels[_votes(decisions, classes)]
    transform = attrs["post_transform"]
    if attrs.get("prob_a"):
        return winners, _transform(_coupled_probabilities(decisions, attrs, classes), transform)
    if classes == 2:
        return winners, _binary_scores(decisions[:, 0], transform, symmetric=transform == "NONE")
    return winners, _transform(decisions, transform)


def _check_svm_regressor(node: Node, opset: int) -> str | None:
    attrs = node.attrs
    supports = attrs.get("n_supports", 0)
    if supports and len(attrs.get("support_vectors", [])) % supports:
        return "support_vectors must hold n_supports whole vectors"
    if supports and len(attrs.get("coefficients", [])) != supports:
        return "coefficients must give one weight per support vector"
    return _check_svm(node)


@_register("SVMRegressor", check=_check_svm_regressor)
def _svm_regressor(ctx: KernelContext, x: Array) -> Array:
    """``sum(coefficients * kernel(x, support vectors)) + rho``, or a linear model without
    support vectors; a one-class SVM answers 1 or -1."""
    attrs = ctx.attrs
    coefficients = np.asarray(attrs["coefficients"], dtype=FLOAT32)
    if attrs["n_supports"]:
        vectors = np.asarray(attrs["support_vectors"], dtype=FLOAT32).reshape(attrs["n_supports"], -1)
        scores = _svm_kernel(attrs, _svm_rows(x, vectors.shape[1]), vectors) @ coefficients
    else:
        scores = _svm_rows(x, len(coefficients)) @ coefficients
    scores = scores + np.float32(attrs["rho"][0])
    if attrs["one_class"]:
        scores = np.where(scores > 0, np.float32(1), np.float32(-1))
    return _transform(scores[:, None], attrs["post_transform"])


# Tree ensembles ------------------------------------------------------------------------------

#: Branch modes as TreeEnsemble (version 5) numbers them, and the leaf mode.
_LEQ, _LT, _GTE, _GT, _EQ, _NEQ, _MEMBER, _LEAF = range(8)
_LEGACY_MODES = {
    "BRANCH_LEQ": _LEQ,
    "BRANCH_LT": _LT,
    "BRANCH_GTE": _GTE,
    "BRANCH_GT": _GT,
    "BRANCH_EQ": _EQ,
    "BRANCH_NEQ": _NEQ,
    "LEAF": _LEAF,
}
_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")
#: TreeEnsemble's numbering of aggregate functions and post transforms.
_AGGREGATE_CODES = dict(enumerate(_AGGREGATES))
_TRANSFORM_CODES = dict(enumerate(("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")))


class InvalidForest(ValueError):
    """Tree ensemble attributes that do not describe a forest."""


@dataclass(frozen=True)
class _Forest:
    """Trees as flat node arrays: a branch node tests ``x[feature] <mode> threshold`` (or set
    membership) and moves to ``true_next`` or ``false_next``; leaves carry weighted targets.

    ``leaf_node``, ``leaf_target`` and ``leaf_weight`` list one weight each; a leaf may have
    several. ``depth`` bounds the number of branches on any path from a root.
    """

    feature: Array
    threshold: Array
    mode: Array
    true_next: Array
    false_next: Array
    missing_true: Array
    roots: Array
    members: dict[int, Array]
    leaf_node: Array
    leaf_target: Array
    leaf_weight: Array
    depth: int

    @classmethod
    def build(cls, **arrays: Any) -> _Forest:
        """Check the node arrays (in-range indices, no cycles) and measure the depth."""
        size = len(arrays["mode"])
        for name in ("feature", "threshold", "true_next", "false_next", "missing_true"):
            if len(arrays[name]) != size:
                raise InvalidForest(f"{name} has {len(arrays[name])} entries for {size} nodes")
        branch = arrays["mode"] != _LEAF
        for name in ("true_next", "false_next", "roots", "leaf_node"):
            targets = arrays[name][branch] if name.endswith("next") else arrays[name]
            if len(targets) and (targets.min() < 0 or targets.max() >= size):
                raise InvalidForest(f"{name} points outside the {size} nodes")
        if (arrays["feature"][branch] < 0).any():
            raise InvalidForest("a branch tests a negative feature index")
        return cls(**arrays, depth=_depth(arrays["roots"], arrays["true_next"], arrays["false_next"], branch))

    def leaves(self, x: Array) -> Array:
        """``[N, trees]``: the leaf each row of ``x`` reaches in each tree.

        Integer inputs are compared in the thresholds' type (as C++ converts them), floats in
        the wider of the two types.
        """
        common = self.threshold.dtype if x.dtype.kind in "iu" else np.result_type(x, self.threshold)
        points, thresholds = _rows(x).astype(common), self.threshold.astype(common)
        if points.shape[1] <= self.feature[self.mode != _LEAF].max(initial=-1):
            raise ValueError(f"the trees test features beyond the input's {points.shape[1]}")
        current = np.tile(self.roots, (points.shape[0], 1))
        for _ in range(self.depth):
            rows, trees = np.nonzero(self.mode[current] != _LEAF)
            if not len(rows):
                break
            nodes = current[rows, trees]
            go_true = self._branch(nodes, points[rows, self.feature[nodes]], thresholds[nodes])
            current[rows, trees] = np.where(go_true, self.true_next[nodes], self.false_next[nodes])
        return current

    def _branch(self, nodes: Array, values: Array, threshold: Array) -> Array:
        mode = self.mode[nodes]
        with np.errstate(invalid="ignore"):
            tests = [values <= threshold, values < threshold, values >= threshold, values > threshold]
            tests += [values == threshold, values != threshold]
        result = np.select([mode == code for code in range(len(tests))], tests, default=False)
        for node, members in self.members.items():
            chosen = nodes == node
            if chosen.any():
                result[chosen] = np.isin(values[chosen], members)
        return result | (self.missing_true[nodes] & np.isnan(values))

    def aggregate(self, leaves: Array, targets: int, function: str, dtype: np.dtype) -> tuple[Array, Array]:
        """``[N, targets]`` scores, accumulated tree by tree in ``dtype``, and which targets got any."""
        if len(self.leaf_target) and (self.leaf_target.min() < 0 or self.leaf_target.max() >= targets):
            raise ValueError(f"leaf targets must lie in [0, {targets})")
        combine = {"MIN": np.minimum, "MAX": np.maximum}.get(function, np.add)
        start = {"MIN": np.inf, "MAX": -np.inf}.get(function, 0.0)
        weights = np.full((len(self.mode), targets), start, dtype=dtype)
        combine.at(weights, (self.leaf_node, self.leaf_target), self.leaf_weight.astype(dtype))
        scored = np.zeros((len(self.mode), targets), dtype=bool)
        scored[self.leaf_node, self.leaf_target] = True
        scores = np.full((leaves.shape[0], targets), start, dtype=dtype)
        hit = np.zeros(scores.shape, dtype=bool)
        for tree in range(leaves.shape[1]):
            reached = leaves[:, tree]
            scores = np.where(scored[reached], combine(scores, weights[reached]), scores)
            hit |= scored[reached]
        scores = np.where(hit, scores, 0)
        if function == "AVERAGE":
            scores = scores / max(leaves.shape[1], 1)
        return scores, hit


def _depth(roots: Array, true_next: Array, false_next: Array, branch: Array) -> int:
    """The most branches on a path from a root; raises :class:`InvalidForest` on a cycle."""
    frontier, depth = np.unique(roots), 0
    while True:
        frontier = frontier[branch[frontier]]
        if not len(frontier):
            return depth
        depth += 1
        if depth > len(branch):
            raise InvalidForest("the trees have a cycle")
        frontier = np.unique(np.concatenate([true_next[frontier], false_next[frontier]]))


def _attr_array(attrs: Attrs, name: str, dtype: np.dtype, size: int = 0, fill: Any = 0) -> Array:
    """An attribute as an array, or ``size`` times ``fill`` when absent."""
    value = attrs.get(name)
    return np.full(size, fill, dtype=dtype) if value is None else np.asarray(value, dtype=dtype).reshape(-1)


def _tensor_or_list(attrs: Attrs, name: str) -> Array | None:
    """``{name}_as_tensor`` (double) if given, else the float list ``name``, else None."""
    tensor = attrs.get(f"{name}_as_tensor")
    if tensor is not None:
        return np.asarray(tensor).reshape(-1)
    value = attrs.get(name)
    return None if value is None else np.asarray(value, dtype=FLOAT32)


def _legacy_forest(attrs: Attrs, leaves: str) -> _Forest:
    """The forest of TreeEnsembleRegressor (``leaves="target"``) or TreeEnsembleClassifier (``"class"``).

    Nodes are named by ``(tree id, node id)``; each tree's root is its first listed node.
    """
    trees = _attr_array(attrs, "nodes_treeids", INT64)
    ids = _attr_array(attrs, "nodes_nodeids", INT64)
    names = attrs.get("nodes_modes") or []
    if len(ids) != len(trees) or len(names) != len(trees):
        raise InvalidForest("nodes_treeids, nodes_nodeids and nodes_modes differ in length")
    if any(name not in _LEGACY_MODES for name in names):
        raise InvalidForest(f"nodes_modes must be among {list(_LEGACY_MODES)}")
    lookup = _NodeNames(trees, ids)
    mode = np.array([_LEGACY_MODES[name] for name in names], dtype=np.int8)
    thresholds = _tensor_or_list(attrs, "nodes_values")
    own = np.arange(len(trees))
    branch = mode != _LEAF

    def next_node(name: str) -> Array:
        children = _attr_array(attrs, name, INT64, len(trees))
        if len(children) != len(trees):
            raise InvalidForest(f"{name} has {len(children)} entries for {len(trees)} nodes")
        return np.where(branch, lookup.find(trees, children, name), own)

    _, first = np.unique(trees, return_index=True)
    leaf_trees = _attr_array(attrs, f"{leaves}_treeids", INT64)
    weights = _tensor_or_list(attrs, f"{leaves}_weights")
    return _Forest.build(
        feature=_attr_array(attrs, "nodes_featureids", INT64, len(trees)),
        threshold=np.zeros(len(trees), FLOAT32) if thresholds is None else thresholds,
        mode=mode,
        true_next=next_node("nodes_truenodeids"),
        false_next=next_node("nodes_falsenodeids"),
        missing_true=_missing_tracks(attrs, len(trees)),
        roots=np.sort(first),
        members={},
        leaf_node=lookup.find(
            leaf_trees, _attr_array(attrs, f"{leaves}_nodeids", INT64), f"{leaves}_nodeids"
        ),
        leaf_target=_attr_array(attrs, f"{leaves}_ids", INT64),
        leaf_weight=np.zeros(0, FLOAT32) if weights is None else weights,
    )


@dataclass(frozen=True)
class _NodeNames:
    """Finds nodes by ``(tree id, node id)``."""

    trees: Array
    ids: Array

    def find(self, trees: Array, ids: Array, what: str) -> Array:
        if len(trees) != len(ids):
            raise InvalidForest(f"{what} and its tree ids differ in length")
        known = np.stack([self.trees, self.ids], axis=1)
        if len(np.unique(known, axis=0)) != len(known):
            raise InvalidForest("a (tree id, node id) pair is listed twice")
        order = np.lexsort((self.ids, self.trees))
        wanted = np.stack([trees, ids], axis=1)
        keys = known[order]
        position = np.minimum(_search_rows(keys, wanted), max(len(keys) - 1, 0))
        if len(wanted) and (not len(keys) or (keys[position] != wanted).any()):
            raise InvalidForest(f"{what} names a node that is not in its tree")
        return order[position] if len(keys) else np.zeros(0, INT64)


def _search_rows(sorted_pairs: Array, pairs: Array) -> Array:
    """Where each ``(tree, node)`` pair would go in lexicographically sorted pairs."""
    combined = sorted_pairs[:, 0].astype(np.float64) * 2**32 + sorted_pairs[:, 1]
    wanted = pairs[:, 0].astype(np.float64) * 2**32 + pairs[:, 1]
    return np.searchsorted(combined, wanted)


def _missing_tracks(attrs: Attrs, size: int) -> Array:
    tracks = _attr_array(attrs, "nodes_missing_value_tracks_true", INT64)
    return np.pad(tracks[:size] == 1, (0, max(size - len(tracks), 0)))


def _tree_ensemble_forest(attrs: Attrs) -> _Forest:
    """The forest of TreeEnsemble (version 5): branch nodes first, then the leaves."""
    features = _attr_array(attrs, "nodes_featureids", INT64)
    count, leaf_count = len(features), len(attrs["leaf_targetids"])
    mode = np.asarray(attrs["nodes_modes"]).reshape(-1).astype(np.int8)
    if len(mode) != count or (mode < 0).any() or (mode > _MEMBER).any():
        raise InvalidForest("nodes_modes must give one mode in [0, 6] per node")
    own = np.arange(count, count + leaf_count)

    def next_node(name: str) -> Array:
        children = _attr_array(attrs, f"nodes_{name}nodeids", INT64)
        to_leaf = _attr_array(attrs, f"nodes_{name}leafs", INT64)
        if len(children) != count or len(to_leaf) != count:
            raise InvalidForest(f"nodes_{name}nodeids and nodes_{name}leafs must have one entry per node")
        return np.concatenate([children + count * (to_leaf == 1), own])

    weights = np.asarray(attrs["leaf_weights"]).reshape(-1)
    if len(weights) != leaf_count:
        raise InvalidForest("leaf_weights and leaf_targetids differ in length")
    splits = np.asarray(attrs["nodes_splits"]).reshape(-1)
    return _Forest.build(
        feature=np.concatenate([features, np.zeros(leaf_count, INT64)]),
        threshold=np.concatenate([splits, np.zeros(leaf_count, splits.dtype)]),
        mode=np.concatenate([mode, np.full(leaf_count, _LEAF, np.int8)]),
        true_next=next_node("true"),
        false_next=next_node("false"),
        missing_true=np.pad(_missing_tracks(attrs, count), (0, leaf_count)),
        roots=_attr_array(attrs, "tree_roots", INT64),
        members=_membership(attrs, mode),
        leaf_node=own,
        leaf_target=_attr_array(attrs, "leaf_targetids", INT64),
        leaf_weight=weights,
    )


def _membership(attrs: Attrs, mode: Array) -> dict[int, Array]:
    """The value set of each set-membership node, in node order; ``membership_values`` lists the
    sets one after another, each ended by a NaN."""
    nodes = np.flatnonzero(mode == _MEMBER)
    if not len(nodes):
        return {}
    values = _attr_array(attrs, "membership_values", FLOAT64)
    ends = np.flatnonzero(np.isnan(values))
    if len(ends) < len(nodes) - 1 or (len(ends) == len(nodes) - 1 and len(values) == ends[-1:] + 1):
        raise InvalidForest(f"membership_values holds fewer than the {len(nodes)} sets of the nodes")
    sets = np.split(values, ends)
    return {int(node): members[~np.isnan(members)] for node, members in zip(nodes, sets, strict=False)}


def _forest_reason(build: Callable[[Attrs], _Forest], attrs: Attrs) -> str | None:
    """Why the attributes do not describe a forest, or None."""
    try:
        build(attrs)
    except (InvalidForest, KeyError, TypeError, ValueError) as error:
        return f"not a valid tree ensemble: {error}"
    return None


def _base_values(attrs: Attrs, allowed: Sequence[int]) -> str | None:
    """Why the number of base values is not one of ``allowed``, or None."""
    base = _tensor_or_list(attrs, "base_values")
    count = 0 if base is None else len(base)
    return None if count in allowed else f"{count} base_values, expected {' or '.join(map(str, allowed))}"


def _with_base(scores: Array, attrs: Attrs) -> Array:
    base = _tensor_or_list(attrs, "base_values")
    return scores if base is None else scores + base.astype(scores.dtype)


def _weights_dtype(attrs: Attrs, leaves: str) -> np.dtype:
    """Scores add up in the leaf weights' type: double when given as a tensor, else float32."""
    return FLOAT64 if attrs.get(f"{leaves}_weights_as_tensor") is not None else FLOAT32


def _check_regressor(node: Node, opset: int) -> str | None:
    attrs = node.attrs
    targets = attrs.get("n_targets")
    if not isinstance(targets, int) or targets < 1:
        return "n_targets must be a positive integer"
    if attrs.get("aggregate_function", "SUM") not in _AGGREGATES:
        return f"aggregate_function must be one of {list(_AGGREGATES)}"
    reason = _base_values(attrs, (0, targets) if targets > 1 else (0, 1))
    reason = reason or _check_transform(attrs.get("post_transform", "NONE"))
    return reason or _forest_reason(lambda attrs: _legacy_forest(attrs, "target"), attrs)


@_register("TreeEnsembleRegressor", check=_check_regressor)
def _tree_ensemble_regressor(ctx: KernelContext, x: Array) -> Array:
    """Aggregated leaf weights plus base values; with several targets, a target no leaf
    reached scores 0, base value or not."""
    attrs = ctx.attrs
    forest = _legacy_forest(attrs, "target")
    dtype = _weights_dtype(attrs, "target")
    scores, hit = forest.aggregate(forest.leaves(x), attrs["n_targets"], attrs["aggregate_function"], dtype)
    scores = _with_base(scores, attrs)
    if scores.shape[1] > 1:
        scores = np.where(hit, scores, 0)
    return _transform(scores, attrs["post_transform"])


def _check_classifier(node: Node, opset: int) -> str | None:
    attrs = node.attrs
    classes = len(attrs.get("classlabels_int64s") or attrs.get("classlabels_strings") or [])
    used = set(attrs.get("class_ids") or [])
    if classes < 2 or not used or not used <= set(range(classes)):
        return "there must be two or more class labels, and class_ids among them"
    binary = classes == 2 and len(used) == 1
    if binary:
        allowed = (0, 1) if used == {0} else (0,)
        reason = _base_values(attrs, allowed) or _check_transform(attrs.get("post_transform"), used == {0})
    else:
        reason = _base_values(attrs, (0, classes)) or _check_transform(attrs.get("post_transform", "NONE"))
    return reason or _forest_reason(lambda attrs: _legacy_forest(attrs, "class"), attrs)


@_register("TreeEnsembleClassifier", check=_check_classifier)
def _tree_ensemble_classifier(ctx: KernelContext, x: Array) -> tuple[Array, Array]:
    """The top class and the class scores. With two classes and weights for one class only, the
    score ``s`` of that class decides: class 1 wins when ``s > 0.5`` (all weights positive) or
    ``s > 0`` (mixed weights)."""
    attrs = ctx.attrs
    forest = _legacy_forest(attrs, "class")
    labels = _labels(attrs, "classlabels_int64s", "classlabels_strings")
    scores, hit = forest.aggregate(forest.leaves(x), len(labels), "SUM", _weights_dtype(attrs, "class"))
    scores = _with_base(scores, attrs)
    used = np.unique(forest.leaf_target)
    if len(labels) == 2 and len(used) == 1:
        return _binary_classifier(scores[:, used[0]], labels, forest.leaf_weight, int(used[0]), attrs)
    if _tensor_or_list(attrs, "base_values") is not None:
        hit[:] = True
    best = np.where(hit, scores, -np.inf).argmax(axis=1)
    return labels[best], _transform(scores, attrs["post_transform"])


def _binary_classifier(
    score: Array, labels: Array, weights: Array, scored: int, attrs: Attrs
) -> tuple[Array, Array]:
    positive = bool((weights >= 0).all())
    winner = labels[(score > (0.5 if positive else 0.0)).astype(INT64)]
    if scored == 1:
        return winner, _transform(np.stack([np.zeros_like(score), score], axis=1), attrs["post_transform"])
    return winner, _binary_scores(score, attrs["post_transform"], symmetric=not positive)


def _check_tree_ensemble(node: Node, opset: int) -> str | None:
    attrs = node.attrs
    if attrs.get("aggregate_function", 1) not in _AGGREGATE_CODES:
        return f"aggregate_function must be one of {list(_AGGREGATE_CODES)}"
    if attrs.get("post_transform", 0) not in _TRANSFORM_CODES:
        return f"post_transform must be one of {list(_TRANSFORM_CODES)}"
    return _forest_reason(_tree_ensemble_forest, attrs)


@_register("TreeEnsemble", check=_check_tree_ensemble, since=5)
def _tree_ensemble(ctx: KernelContext, x: Array) -> Array:
    attrs = ctx.attrs
    forest = _tree_ensemble_forest(attrs)
    targets = attrs.get("n_targets") or int(forest.leaf_target.max(initial=-1)) + 1
    dtype = FLOAT32 if x.dtype.itemsize < 4 else x.dtype
    function = _AGGREGATE_CODES[attrs["aggregate_function"]]
    scores, _ = forest.aggregate(forest.leaves(x), targets, function, dtype)
    return _transform(scores, _TRANSFORM_CODES[attrs["post_transform"]], dtype).astype(x.dtype)
