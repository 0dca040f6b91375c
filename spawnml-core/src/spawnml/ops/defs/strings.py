"""String operators of ai.onnx: StringNormalizer, StringConcat, StringSplit, RegexFullMatch
and TfIdfVectorizer. Strings are numpy object arrays of ``str``."""

from __future__ import annotations

import numpy as np

from ...dtypes import STRING
from ...errors import InvalidGraphError
from ..schema import REQUIRED, Attribute, InferenceContext, OpSchema, TensorType
from ..shapes import broadcast_inputs

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)
FLOAT32 = np.dtype(np.float32)


def _input_shape(ctx: InferenceContext) -> tuple | None:
    source = ctx.input(0)
    return source.shape if source is not None else None


def _infer_normalizer(ctx: InferenceContext) -> list[TensorType]:
    """``[C]`` gives ``[C']`` and ``[1, C]`` gives ``[1, C']``: stopwords shorten the last axis."""
    shape = _input_shape(ctx)
    if shape is not None and (len(shape) not in (1, 2) or (len(shape) == 2 and shape[0] not in (1, None))):
        raise InvalidGraphError(f"StringNormalizer takes a [C] or [1, C] input, got shape {list(shape)}")
    return [TensorType(STRING, None if shape is None else (*shape[:-1], None))]


def _infer_split(ctx: InferenceContext) -> list[TensorType]:
    shape = _input_shape(ctx)
    return [
        TensorType(STRING, None if shape is None else (*shape, None)),
        TensorType(INT64, shape),
    ]


def _infer_regex(ctx: InferenceContext) -> list[TensorType]:
    return [TensorType(BOOL, _input_shape(ctx))]


def _infer_tfidf(ctx: InferenceContext) -> list[TensorType]:
    """``[C]`` gives ``[W]`` and ``[N, C]`` gives ``[N, W]``, with ``W = max(ngram_indexes) + 1``."""
    shape = _input_shape(ctx)
    width = max(ctx.attrs["ngram_indexes"], default=-1) + 1
    if shape is None:
        return [TensorType(FLOAT32, None)]
    if len(shape) not in (1, 2):
        raise InvalidGraphError(f"TfIdfVectorizer takes a [C] or [N, C] input, got shape {list(shape)}")
    return [TensorType(FLOAT32, (*shape[:-1], width))]


SCHEMAS: list[OpSchema] = [
    OpSchema(
        "StringNormalizer",
        since_version=10,
        attributes=(
            Attribute("case_change_action", "string", "NONE"),
            Attribute("is_case_sensitive", "int", 0),
            Attribute("locale", "string"),
            Attribute("stopwords", "strings", []),
        ),
        infer=_infer_normalizer,
    ),
    OpSchema("StringConcat", since_version=20, inputs=(2, 2), infer=broadcast_inputs(output_dtype=STRING)),
    OpSchema(
        "StringSplit",
        since_version=20,
        outputs=(2, 2),
        attributes=(Attribute("delimiter", "string"), Attribute("maxsplit", "int")),
        infer=_infer_split,
    ),
    OpSchema(
        "RegexFullMatch",
        since_version=20,
        attributes=(Attribute("pattern", "string", REQUIRED),),
        infer=_infer_regex,
    ),
    OpSchema(
        "TfIdfVectorizer",
        since_version=9,
        attributes=(
            Attribute("mode", "string", REQUIRED),
            Attribute("min_gram_length", "int", REQUIRED),
            Attribute("max_gram_length", "int", REQUIRED),
            Attribute("max_skip_count", "int", REQUIRED),
            Attribute("ngram_counts", "ints", REQUIRED),
            Attribute("ngram_indexes", "ints", REQUIRED),
            Attribute("pool_int64s", "ints"),
            Attribute("pool_strings", "strings"),
            Attribute("weights", "floats"),
        ),
        infer=_infer_tfidf,
    ),
]
