"""String operators against onnxruntime: StringNormalizer, StringConcat, StringSplit,
RegexFullMatch and TfIdfVectorizer. Strings must match exactly; TfIdfVectorizer's float32
counts and weights are exact too.

onnxruntime's StringNormalizer needs the locale it is given installed; tests name
``C.UTF-8``, which every glibc has, and whose case mapping is the one of ``en_US.UTF-8``.
StringSplit follows the specification and its reference (Python's ``str.split``) where
onnxruntime differs: it splits on spaces only, gives no substring for an empty string, and
strips trailing whitespace from the remainder left by ``maxsplit``.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx.reference import ReferenceEvaluator

from tests.ops.conftest import assert_close, make_model

UNICODE = ["Straße", "İstanbul", "ǅungla", "ΣΑΣ", "ᾈ", "ẞ", "Éa", "ſ", "K", "ı"]


def strings(*values: str) -> np.ndarray:
    return np.array(values, dtype=object)


def run_ours(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)


def run_onnxruntime(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def refused(model: onnx.ModelProto) -> str:
    with pytest.raises(spawnml.UnsupportedOperatorError) as error:
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])
    return str(error.value)


# StringNormalizer ---------------------------------------------------------------------------


def normalizer(x: np.ndarray, **attrs) -> onnx.ModelProto:
    return make_model("StringNormalizer", {"x": x}, opset=10, **attrs)


@pytest.mark.parametrize("action", ["NONE", "LOWER", "UPPER"])
@pytest.mark.parametrize(
    "stopwords",
    [{}, {"stopwords": ["monday", "s", "i"]}, {"stopwords": ["MONDAY", "ſ", "été"], "is_case_sensitive": 1}],
    ids=["none", "insensitive", "sensitive"],
)
@pytest.mark.parametrize("rank", [1, 2])
def test_string_normalizer(check, action, stopwords, rank):
    words = ["monday", "Monday", "MONDAY", "tuesday", "S", "s", "ſ", "ÉTÉ", "été", "İ", *UNICODE]
    x = strings(*words).reshape((-1,) if rank == 1 else (1, -1))
    check(normalizer(x, case_change_action=action, locale="C.UTF-8", **stopwords), {"x": x})


@pytest.mark.parametrize("rank", [1, 2])
def test_string_normalizer_all_filtered(check, rank):
    """Removing every word leaves one empty string."""
    x = strings("a", "A").reshape((-1,) if rank == 1 else (1, -1))
    check(normalizer(x, stopwords=["a"], locale="C.UTF-8"), {"x": x})


def test_string_normalizer_default_locale():
    """Without a locale onnxruntime takes en_US.UTF-8 (absent here), which maps case like C.UTF-8."""
    x = strings(*UNICODE)
    for action in ("LOWER", "UPPER"):
        (ours,) = run_ours(normalizer(x, case_change_action=action), {"x": x})
        (reference,) = run_onnxruntime(normalizer(x, case_change_action=action, locale="C.UTF-8"), {"x": x})
        np.testing.assert_array_equal(ours, reference)


def test_string_normalizer_c_locale_is_ascii(check):
    x = strings("Éa", "straße", "abc", "İx")
    for action in ("LOWER", "UPPER"):
        check(normalizer(x, case_change_action=action, locale="C", stopwords=["ABC"]), {"x": x})


def test_string_normalizer_refusals():
    x = strings("a")
    assert "case rules" in refused(normalizer(x, case_change_action="UPPER", locale="tr_TR.UTF-8"))
    assert "case_change_action" in refused(normalizer(x, case_change_action="lower"))
    assert "UTF-8" in refused(normalizer(x, locale="de_DE.ISO-8859-1"))


# StringConcat ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "y"),
    [
        (strings("a", "", "é"), strings("b", "c", "ü")),
        (strings("a", "b").reshape(2, 1), strings("x", "yz", "")),
        (np.array("cat", dtype=object), np.array("s", dtype=object)),
        (strings("a", "b").reshape(1, 2), np.array("😀", dtype=object)),
        (np.empty((0, 2), dtype=object), strings("x", "y")),
    ],
    ids=["same", "broadcast", "scalars", "scalar-right", "empty"],
)
def test_string_concat(check, x, y):
    check(make_model("StringConcat", {"x": x, "y": y}, opset=20), {"x": x, "y": y})


# StringSplit ------------------------------------------------------------------------------------

SPLIT_TEXT = strings("a.b.c", "a..b", ".", "abc", "a b  c", "  lead and trail  ", "x.y.z.w")


@pytest.mark.parametrize(
    "attrs",
    [
        {"delimiter": "."},
        {"delimiter": ".", "maxsplit": 1},
        {"delimiter": ".."},
        {"delimiter": " ", "maxsplit": -3},
        {},
    ],
    ids=["dot", "maxsplit", "two-chars", "negative-maxsplit", "whitespace"],
)
@pytest.mark.parametrize("shape", [(7,), (7, 1)])
def test_string_split(check, attrs, shape):
    x = SPLIT_TEXT.reshape(shape)
    check(make_model("StringSplit", {"x": x}, outputs=2, opset=20, **attrs), {"x": x})


def test_string_split_empty_input(check):
    x = np.empty((2, 0), dtype=object)
    check(make_model("StringSplit", {"x": x}, outputs=2, opset=20, delimiter="-"), {"x": x})


@pytest.mark.parametrize(
    "attrs", [{}, {"delimiter": "."}, {"delimiter": " ", "maxsplit": 1}, {"maxsplit": 1}]
)
def test_string_split_where_onnxruntime_differs(attrs):
    """Tabs, newlines and no-break spaces are whitespace; an empty string is one empty substring
    (with a delimiter); the remainder after ``maxsplit`` keeps its trailing whitespace."""
    x = strings("a\tb\nc", "", "x\xa0y  z", " ", "  lead and trail  ")
    model = make_model("StringSplit", {"x": x}, outputs=2, opset=20, **attrs)
    reference = ReferenceEvaluator(model).run(None, {"x": x})
    assert_close(run_ours(model, {"x": x}), [reference[0].astype(object), reference[1].astype(np.int64)])


# RegexFullMatch ---------------------------------------------------------------------------------

REGEX_INPUTS = strings(
    "a1",
    "s",
    "S",
    "ſ",
    "k",
    "K",
    "K",
    "é",
    "É",
    "A",
    "aA",
    "ab",
    "aB",
    "x",
    "-",
    "\x08",
    "😀",
    "\n",
    "a\n",
    "",
    "\t",
    "a b",
    "a\vb",
    "١٢",
    "12",
    "abc",
    "abc\n",
    "ab_c",
    "aé",
    "[:",
    "a{,2}",
    "aa",
    "{",
    "]",
    "\\",
    "i",
    "I",
    "İ",
    "ı",
    "www.google.com",
    "account@gmail.com",
    "σ",
    "ς",
    "Σ",
    "ß",
    "ẞ",
    "a\nb",
)
#: RE2 patterns whose meaning Python's re shares only once translated.
PATTERNS = [
    r"\d+",
    r"\w+",
    r"a\sb",
    r"\S+",
    r"[\s]+",
    r"[^\d]+",
    r"\W",
    r"[\W]",
    r"(?i)\W",
    r"(?i)[\W]",
    r"(?i)[^\W]",
    r"(?i)\w+",
    r"(?i)[[:upper:]]+",
    r"(?i)[[:^lower:]]",
    r"[[:alpha:]]+",
    r"[[:^alpha:]]",
    r"[[:word:]]+",
    r"[[:alpha:]-z]",
    r"[\d-z]+",
    r"[\w-]",
    r"abc$",
    r"(?m)abc$",
    r"a$\n?",
    r"(?m)a$\n?",
    r"a\b.*",
    r".*\bb",
    r"\B",
    r".*\B.*",
    r"a{,2}",
    r"a{2}",
    r"{",
    r"a{",
    r"[]x]+",
    r"[^]a]+",
    r"x]",
    r"(?i)k",
    r"(?i)s",
    r"(?i)i",
    r"(?i)İ",
    r"(?i)[a-z]",
    r"(?i)σ",
    r"(?i)ß",
    r"\Qa{\E",
    r"\x41",
    r"\x{1F600}",
    r"\101",
    r"\12",
    r"\0",
    r"\z",
    r"abc\z",
    r"\A\d",
    r"(?P<n>a)1",
    r"(?<n>a)1",
    r"a(?i)b",
    r"(?i)a(?-i)b",
    r"a(?i)b|c",
    r"x(?i)(a|b)",
    r"(?i:A)",
    r"(?s).",
    r"(?s:.)",
    r"[^\n]",
    r"a*?",
    r"x??",
    r"a{2,3}?",
    r"[a&&b]",
    r"[[]",
    r"\_",
    r"\ ",
    r"a|",
    r"()",
    r"www\.[\w.-]+\.\bcom\b",
    r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)",
]
#: RE2 patterns onnxruntime refuses, and that Python would run.
NOT_RE2 = [
    r"\Z",
    r"(?=a)a",
    r"(?P=n)",
    r"a{1001}",
    r"(?#c)a",
    r"(?x) a",
    r"a++",
    r"(?>a)",
    r"[\b]",
    r"\1",
    r"\u0041",
]
#: Valid RE2 without a Python equivalent.
UNTRANSLATABLE = [r"\pL", r"\p{Greek}", r"(?U)a+", r"\C"]


def regex(pattern: str) -> onnx.ModelProto:
    return make_model("RegexFullMatch", {"x": REGEX_INPUTS}, opset=20, pattern=pattern)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_regex_full_match(check, pattern):
    check(regex(pattern), {"x": REGEX_INPUTS})


@pytest.mark.parametrize("pattern", NOT_RE2 + UNTRANSLATABLE)
def test_regex_full_match_refused(pattern):
    assert "pattern" in refused(regex(pattern))


def test_regex_full_match_random_patterns():
    """Random token soups: each either runs as onnxruntime runs it or is refused at load;
    every pattern onnxruntime refuses is refused."""
    tokens = [
        "a",
        "b",
        "i",
        "I",
        "İ",
        "ı",
        "s",
        "ſ",
        "K",
        "é",
        ".",
        "^",
        "$",
        r"\d",
        r"\w",
        r"\s",
        r"\W",
        r"\S",
        r"\b",
        r"\B",
        "[a-z]",
        "[^a-c]",
        r"[\w-]",
        "[[:alpha:]]",
        "[[:^upper:]]",
        "(?i)",
        "(?-i)",
        "(?m)",
        "(?s)",
        "(?i:",
        "(",
        ")",
        "|",
        "*",
        "+",
        "?",
        "*?",
        "{2}",
        "{1,3}",
        "{,2}",
        "{",
        r"\n",
        r"\x41",
        r"\052",
        r"\Q*.\E",
        r"\z",
        " ",
        "-",
        "]",
        r"\*",
        "[.*]",
        r"\x{130}",
        r"[\x{131}]",
    ]
    generator = np.random.default_rng(7)
    compared = 0
    for _ in range(300):
        pattern = "".join(generator.choice(tokens, generator.integers(1, 6)))
        try:
            reference = run_onnxruntime(regex(pattern), {"x": REGEX_INPUTS})
        except Exception:  # onnxruntime refuses the pattern
            refused(regex(pattern))
            continue
        try:
            ours = run_ours(regex(pattern), {"x": REGEX_INPUTS})
        except spawnml.UnsupportedOperatorError:
            continue
        np.testing.assert_array_equal(ours[0], reference[0], err_msg=pattern)
        compared += 1
    assert compared > 150


# TfIdfVectorizer --------------------------------------------------------------------------------

INT_POOL = {
    "ngram_counts": [0, 4],
    "ngram_indexes": [0, 1, 2, 3, 4, 5, 6],
    "pool_int64s": [2, 3, 5, 4, 5, 6, 7, 8, 6, 7],
}


def tfidf(x: np.ndarray, **attrs) -> onnx.ModelProto:
    return make_model("TfIdfVectorizer", {"x": x}, opset=9, **attrs)


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize(("low", "high", "skip"), [(1, 1, 0), (2, 2, 0), (1, 2, 0), (2, 2, 3), (1, 2, 5)])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(12,), (2, 6), (3, 4)])
def test_tfidf_vectorizer(check, mode, low, high, skip, dtype, shape):
    x = np.array([1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8], dtype=dtype).reshape(shape)
    attrs = {
        "mode": mode,
        "min_gram_length": low,
        "max_gram_length": high,
        "max_skip_count": skip,
        **INT_POOL,
    }
    if mode != "TF":
        attrs["weights"] = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]
    check(tfidf(x, **attrs), {"x": x})


def test_tfidf_vectorizer_permuted_columns_and_strings(check):
    """Output columns follow ngram_indexes, weights follow the pool's n-grams."""
    attrs = {"min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 1, "ngram_counts": [0, 3]}
    attrs |= {"ngram_indexes": [4, 0, 2, 1, 7], "weights": [10.0, 20.0, 30.0, 40.0, 50.0]}
    x = strings("a", "b", "c", "a", "zz", "b", "c", "a")
    pool = ["a", "b", "c", "b", "c", "a", "c"]
    for mode in ("TF", "IDF", "TFIDF"):
        check(tfidf(x, mode=mode, pool_strings=pool, **attrs), {"x": x})
        check(tfidf(x.reshape(2, 4), mode=mode, pool_strings=pool, **attrs), {"x": x.reshape(2, 4)})


def test_tfidf_vectorizer_empty_rows(check):
    x = np.zeros((2, 0), np.int64)
    attrs = {"mode": "TF", "min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 0, **INT_POOL}
    check(tfidf(x, **attrs), {"x": x})


def test_tfidf_vectorizer_refusals():
    x = np.zeros(3, np.int64)
    base = {"min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 0, **INT_POOL}
    assert "mode" in refused(tfidf(x, mode="BM25", **base))
    assert "ngram_indexes" in refused(tfidf(x, mode="TF", **{**base, "ngram_indexes": [0, 1]}))
    assert "whole n-grams" in refused(tfidf(x, mode="TF", **{**base, "ngram_counts": [0, 3]}))
