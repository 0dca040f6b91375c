"""CPU kernels of the string operators: StringNormalizer, StringConcat, StringSplit,
RegexFullMatch and TfIdfVectorizer.

Case changes follow onnxruntime under a UTF-8 locale: one character at a time, with
Unicode's simple case mappings (``ß`` stays ``ß`` in upper case). RegexFullMatch patterns are
RE2 syntax; they are translated to Python's ``re`` where the two mean the same, and
refused at load where they do not.
"""

from __future__ import annotations

import functools
import itertools
import re
import string
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from spawnml import dtypes
from spawnml.backend import KernelContext
from spawnml.ir import Node

from .table import KERNELS

Array = np.ndarray

# StringNormalizer ------------------------------------------------------------------------


class _CaseTable(dict[int, str]):
    """A ``str.translate`` table mapping each character by ``convert``, filled as characters appear."""

    def __init__(self, convert: Callable[[str], str]) -> None:
        super().__init__()
        self.convert = convert

    def __missing__(self, code: int) -> str:
        mapped = self[code] = self.convert(chr(code))
        return mapped


def _simple_upper(char: str) -> str:
    """Unicode's one-character upper case of ``char`` (the title case where only that is one character)."""
    for mapped in (char.upper(), char.title()):
        if len(mapped) == 1:
            return mapped
    return char


def _simple_lower(char: str) -> str:
    """Unicode's one-character lower case of ``char`` (``İ`` lowers to ``i``)."""
    return char.lower()[0]


_UNICODE_CASE = {"UPPER": _CaseTable(_simple_upper), "LOWER": _CaseTable(_simple_lower)}
_ASCII_CASE = {
    "UPPER": str.maketrans(string.ascii_lowercase, string.ascii_uppercase),
    "LOWER": str.maketrans(string.ascii_uppercase, string.ascii_lowercase),
}
#: Languages whose locales case-map differently (dotted and dotless i).
_SPECIAL_CASING = frozenset({"tr", "az", "crh"})


def _locale_parts(locale: str) -> tuple[str, str]:
    """The language and the codeset of a POSIX locale name like ``en_US.UTF-8@euro``."""
    name = locale.split("@")[0]
    language, _, codeset = name.partition(".")
    return language.split("_")[0], codeset


def _check_normalizer(node: Node, opset: int) -> str | None:
    action = node.attrs.get("case_change_action", "NONE")
    if action not in ("NONE", "LOWER", "UPPER"):
        return f"case_change_action={action!r} is not one of NONE, LOWER, UPPER"
    locale = node.attrs.get("locale") or ""
    if not isinstance(locale, str):
        return "locale is not UTF-8 text"
    language, codeset = _locale_parts(locale)
    if language in _SPECIAL_CASING:
        return f"locale {node.attrs['locale']!r} has its own case rules, which are not implemented"
    if codeset and codeset.lower().replace("-", "") != "utf8":
        return f"locale {node.attrs['locale']!r} is not a UTF-8 locale"
    return None


def _case_tables(locale: str | None) -> dict[str, Any]:
    """The case tables of a locale: ASCII only in the C and POSIX locales, else Unicode."""
    return _ASCII_CASE if locale in ("C", "POSIX") else _UNICODE_CASE


@KERNELS.register("StringNormalizer", since=10, check=_check_normalizer)
def _string_normalizer(ctx: KernelContext, x: Array) -> Array:
    """Drop stopwords, then change case; ``[C]`` gives ``[C']``, ``[1, C]`` gives ``[1, C']``."""
    if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[0] != 1):
        raise ValueError(f"StringNormalizer takes a [C] or [1, C] input, got shape {list(x.shape)}")
    tables = _case_tables(ctx.attrs.get("locale"))
    action = ctx.attrs["case_change_action"]
    if ctx.attrs["is_case_sensitive"]:
        stopwords = set(ctx.attrs["stopwords"])
        kept = [text for text in x.reshape(-1) if text not in stopwords]
    else:
        lower = tables["LOWER"]
        stopwords = {word.translate(lower) for word in ctx.attrs["stopwords"]}
        kept = [text for text in x.reshape(-1) if text.translate(lower) not in stopwords]
    if action != "NONE":
        kept = [text.translate(tables[action]) for text in kept]
    result = np.array(kept or [""], dtype=dtypes.STRING)
    return result.reshape(1, -1) if x.ndim == 2 else result


# StringConcat and StringSplit ---------------------------------------------------------------


@KERNELS.register("StringConcat", since=20)
def _string_concat(ctx: KernelContext, x: Array, y: Array) -> Array:
    return np.asarray(np.add(x, y), dtype=dtypes.STRING)


@KERNELS.register("StringSplit", since=20)
def _string_split(ctx: KernelContext, x: Array) -> tuple[Array, Array]:
    """Split like Python's ``str.split``: on the delimiter, or on runs of whitespace when it is
    absent or empty; the parts are padded with empty strings to the longest split."""
    delimiter = ctx.attrs.get("delimiter") or None
    maxsplit = ctx.attrs.get("maxsplit", -1)
    parts = [text.split(delimiter, maxsplit) for text in x.reshape(-1)]
    counts = np.array([len(split) for split in parts], dtype=np.int64).reshape(x.shape)
    width = int(counts.max(initial=0))
    padded = np.full((len(parts), width), "", dtype=dtypes.STRING)
    for row, split in enumerate(parts):
        padded[row, : len(split)] = split
    return padded.reshape(*x.shape, width), counts


# RegexFullMatch: RE2 patterns in Python's re -------------------------------------------------


class UnsupportedPattern(ValueError):
    """An RE2 pattern that Python's ``re`` cannot run with the same meaning."""


Ranges = tuple[tuple[int, int], ...]
MAX_CODE_POINT = 0x10FFFF
#: RE2's Perl classes and POSIX classes, which are ASCII-only.
_PERL_CLASSES: dict[str, Ranges] = {
    "d": ((0x30, 0x39),),
    "s": ((0x09, 0x0A), (0x0C, 0x0D), (0x20, 0x20)),
    "w": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)),
}
_POSIX_CLASSES: dict[str, Ranges] = {
    "alnum": ((0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)),
    "alpha": ((0x41, 0x5A), (0x61, 0x7A)),
    "ascii": ((0x00, 0x7F),),
    "blank": ((0x09, 0x09), (0x20, 0x20)),
    "cntrl": ((0x00, 0x1F), (0x7F, 0x7F)),
    "digit": _PERL_CLASSES["d"],
    "graph": ((0x21, 0x7E),),
    "lower": ((0x61, 0x7A),),
    "print": ((0x20, 0x7E),),
    "punct": ((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)),
    "space": ((0x09, 0x0D), (0x20, 0x20)),
    "upper": ((0x41, 0x5A),),
    "word": _PERL_CLASSES["w"],
    "xdigit": ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)),
}
#: Non-ASCII characters that case-fold onto ASCII letters (long s, Kelvin sign).
_FOLDS_ONTO_ASCII = {0x017F: (0x53, 0x73), 0x212A: (0x4B, 0x6B)}
#: The dotted capital and dotless small i: Python folds them onto i, RE2 keeps them apart.
_TURKISH_I = "\u0130\u0131"
MAX_REPEAT = 1000
_FLAG_GROUP = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")
_NAMED_GROUP = re.compile(r"\(\?P?<(\w+)>")
_REPEAT = re.compile(r"\{(\d+)(?:(,)(\d*))?\}")
_POSIX = re.compile(r"\[:(\^?)(\w+):\]")
_OCTAL = re.compile(r"[1-7][0-7]{1,2}|0[0-7]{0,2}")
_HEX = re.compile(r"x(?:\{([0-9A-Fa-f]{1,8})\}|([0-9A-Fa-f]{2}))")


def _code_point(code: int) -> int:
    if code > MAX_CODE_POINT:
        raise UnsupportedPattern(f"character code {code:#x} is beyond Unicode")
    return code


def _literal(code: int) -> str:
    """One character as a Python pattern escape, valid inside and outside brackets."""
    return f"\\U{code:08x}"


def _render(ranges: Ranges) -> str:
    return "".join(_literal(a) + (f"-{_literal(b)}" if b > a else "") for a, b in ranges)


_WORD = f"[{_render(_PERL_CLASSES['w'])}]"
#: RE2's ASCII word boundaries, whatever the case flag.
_BOUNDARIES = {
    "b": f"(?-i:(?<={_WORD})(?!{_WORD})|(?<!{_WORD})(?={_WORD}))",
    "B": f"(?-i:(?<={_WORD})(?={_WORD})|(?<!{_WORD})(?!{_WORD}))",
}


def _complement(ranges: Ranges) -> Ranges:
    gaps, start = [], 0
    for low, high in sorted(ranges):
        if low > start:
            gaps.append((start, low - 1))
        start = max(start, high + 1)
    return (*gaps, (start, MAX_CODE_POINT)) if start <= MAX_CODE_POINT else tuple(gaps)


def _fold_closure(ranges: Ranges) -> Ranges:
    """ASCII ``ranges`` with every character that case-folds onto one of their letters."""
    codes = {code for low, high in ranges for code in range(low, high + 1)}
    letters = {ord(chr(code).swapcase()) for code in codes if chr(code).isalpha()}
    extra = {code for code, folded in _FOLDS_ONTO_ASCII.items() if codes.intersection(folded)}
    return ranges + tuple((code, code) for code in sorted(letters | extra))


def _python_pattern(text: str) -> re.Pattern[str]:
    """``re.compile(text)``, raising :class:`UnsupportedPattern` for errors and warnings."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return re.compile(text)
    except (re.error, FutureWarning, OverflowError) as error:
        raise UnsupportedPattern(f"not a pattern Python's re runs the same way: {error}") from None


@dataclass
class _Group:
    """An open group: its flags, and the flag groups opened inside it by inline ``(?flags)``."""

    flags: frozenset[str]
    inline: list[str] = field(default_factory=list)

    def close_inline(self) -> str:
        return ")" * len(self.inline)

    def reopen_inline(self) -> str:
        return "".join(f"(?{flags}:" for flags in self.inline)


class _Re2Translator:
    """Rewrites an RE2 pattern in Python's ``re`` syntax with the same meaning.

    RE2's ``\\d \\w \\s \\b`` and POSIX classes are ASCII-only, its ``$`` (without the m flag)
    matches only at the very end, ``\\z \\Q..\\E \\x{...}``, octal escapes, inline flags in
    the middle of a pattern and ``{,n}`` (a literal in RE2) need rewriting, and under the i
    flag the dotted capital and dotless small i must not fold onto i; Unicode classes,
    the ungreedy flag and byte matching have no Python equivalent and are refused, as is
    everything RE2 itself rejects that Python would accept (lookaround, backreferences,
    possessive quantifiers, more than 1000 repetitions).
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.pos = 0
        self.groups = [_Group(frozenset())]

    @property
    def flags(self) -> frozenset[str]:
        return self.groups[-1].flags

    def translate(self) -> str:
        out = []
        while self.pos < len(self.pattern):
            out.append(self._next())
        if len(self.groups) > 1:
            raise UnsupportedPattern("missing closing parenthesis")
        out.append(self.groups[0].close_inline())
        return "".join(out)

    def _next(self) -> str:
        char = self.pattern[self.pos]
        if char == "\\":
            return self._escape(in_class=False)
        if char == "[":
            return self._class()
        if char == "(":
            return self._open_group()
        self.pos += 1
        if char == ")":
            if len(self.groups) == 1:
                raise UnsupportedPattern("unbalanced closing parenthesis")
            return self.groups.pop().close_inline() + ")"
        if char == "|":
            group = self.groups[-1]
            return group.close_inline() + "|" + group.reopen_inline()
        if char == "$":
            return "$" if "m" in self.flags else r"\Z"
        if char in "*+?":
            return char + self._quantifier_suffix()
        if char == "{":
            return self._brace()
        return char if char in ".^" else self._char(char)

    def _char(self, char: str) -> str:
        """A literal character; under the i flag the i's fold as in RE2, not as in Python."""
        if "i" not in self.flags or char not in "iI" + _TURKISH_I:
            return re.escape(char) if char.isascii() else _literal(ord(char))
        return "(?-i:[iI])" if char in "iI" else f"(?-i:{char})"

    def _bracket(self, body: str, negated: bool) -> str:
        """A bracketed class; under the i flag, the four i's are matched as RE2 folds them."""
        text = f"[{'^' * negated}{body}]"
        if "i" not in self.flags:
            return text
        positive = _python_pattern(f"[{body}]")
        exact = body + ("iI" if positive.fullmatch("i") or positive.fullmatch("I") else "")
        return f"(?:(?![iI{_TURKISH_I}]){text}|(?-i:(?=[iI{_TURKISH_I}])[{'^' * negated}{exact}]))"

    def _quantifier_suffix(self) -> str:
        following = self.pattern[self.pos : self.pos + 1]
        if following == "+":
            raise UnsupportedPattern("possessive quantifiers are not RE2")
        if following == "?":
            self.pos += 1
            return "?"
        return ""

    def _brace(self) -> str:
        """A ``{n}``, ``{n,}`` or ``{n,m}`` repetition; any other brace is a literal in RE2."""
        match = _REPEAT.match(self.pattern, self.pos - 1)
        if match is None:
            return r"\{"
        if any(int(count) > MAX_REPEAT for count in (match[1], match[3]) if count):
            raise UnsupportedPattern(f"RE2 repeats at most {MAX_REPEAT} times, not {match[0]}")
        self.pos = match.end()
        return match[0] + self._quantifier_suffix()

    def _open_group(self) -> str:
        if not self.pattern.startswith("(?", self.pos):
            self.pos += 1
            self.groups.append(_Group(self.flags))
            return "("
        named = _NAMED_GROUP.match(self.pattern, self.pos)
        if named:
            self.pos = named.end()
            self.groups.append(_Group(self.flags))
            return f"(?P<{named[1]}>"
        match = _FLAG_GROUP.match(self.pattern, self.pos)
        if match is None:
            raise UnsupportedPattern(f"group syntax at {self.pattern[self.pos : self.pos + 4]!r} is not RE2")
        on, off, end = match[1], match[2], match[3]
        if set(on + (off or "")) - set("ims") or off == "" or (end == ")" and not on + (off or "")):
            raise UnsupportedPattern(f"flags {match[0]!r}: only i, m and s are supported")
        self.pos = match.end()
        flags = (self.flags | set(on)) - set(off or "")
        spelled = on + (f"-{off}" if off else "")
        if end == ":":
            self.groups.append(_Group(frozenset(flags)))
            return f"(?{spelled}:" if spelled else "(?:"
        group = self.groups[-1]
        group.flags = frozenset(flags)
        group.inline.append(spelled)
        return f"(?{spelled}:"

    def _escape(self, in_class: bool) -> str:
        if self.pos + 1 >= len(self.pattern):
            raise UnsupportedPattern("trailing backslash")
        char = self.pattern[self.pos + 1]
        self.pos += 2
        if char.lower() in _PERL_CLASSES:
            return self._perl_class(_PERL_CLASSES[char.lower()], char.isupper(), in_class)
        if char in "bBAzQ" and in_class:
            raise UnsupportedPattern(f"\\{char} inside brackets is not RE2")
        if char in _BOUNDARIES:
            return _BOUNDARIES[char]
        if char in "Az":
            return r"\A" if char == "A" else r"\Z"
        if char == "Q":
            end = self.pattern.find(r"\E", self.pos)
            end = len(self.pattern) if end < 0 else end
            text, self.pos = self.pattern[self.pos : end], end + 2
            return "".join(self._char(c) for c in text)
        if char in "aftnrv":
            return "\\" + char
        if char.isascii() and not char.isalnum():
            return "\\" + char
        return self._numeric_escape(char, in_class)

    def _numeric_escape(self, char: str, in_class: bool) -> str:
        """Octal (``\\0``, ``\\12``, ``\\123``) and hexadecimal (``\\x41``, ``\\x{263a}``) escapes."""
        start = self.pos - 1
        octal = _OCTAL.match(self.pattern, start)
        if char.isdigit() and octal:
            self.pos = octal.end()
            code = int(octal[0], 8)
            return _literal(code) if in_class else self._char(chr(code))
        hexadecimal = _HEX.match(self.pattern, start)
        if hexadecimal:
            self.pos = hexadecimal.end()
            code = _code_point(int(hexadecimal[1] or hexadecimal[2], 16))
            return _literal(code) if in_class else self._char(chr(code))
        if char.isdigit():
            raise UnsupportedPattern(f"\\{char}: backreferences are not RE2")
        if char in "pP":
            raise UnsupportedPattern(f"Unicode class \\{char}: Python's re has none")
        raise UnsupportedPattern(f"escape \\{char} is not RE2 or means something else in Python")

    def _perl_class(self, ranges: Ranges, negated: bool, in_class: bool) -> str:
        """An ASCII class: bracketed on its own, or its ranges inside brackets."""
        if not in_class:
            return self._bracket(_render(ranges), negated)
        if negated:
            ranges = _complement(_fold_closure(ranges) if "i" in self.flags else ranges)
        return _render(ranges) + self._literal_dash()

    def _literal_dash(self) -> str:
        """After a class inside brackets, RE2 reads ``-`` as a literal."""
        if self.pattern.startswith("-", self.pos) and not self.pattern.startswith("-]", self.pos):
            self.pos += 1
            return r"\-"
        return ""

    def _class(self) -> str:
        negated = self.pattern.startswith("^", self.pos + 1)
        self.pos += 1 + negated
        items: list[str] = []
        while True:
            if self.pos >= len(self.pattern):
                raise UnsupportedPattern("missing closing ]")
            char = self.pattern[self.pos]
            if char == "]" and items:
                self.pos += 1
                return self._bracket("".join(items), negated)
            items.append(self._class_item(char))

    def _class_item(self, char: str) -> str:
        if char == "\\":
            return self._escape(in_class=True)
        posix = _POSIX.match(self.pattern, self.pos) if char == "[" else None
        if posix:
            if posix[2] not in _POSIX_CLASSES:
                raise UnsupportedPattern(f"unknown POSIX class {posix[0]}")
            self.pos = posix.end()
            return self._perl_class(_POSIX_CLASSES[posix[2]], bool(posix[1]), in_class=True)
        self.pos += 1
        return "\\" + char if char in "[]&~|" else char


@functools.lru_cache(maxsize=256)
def compile_re2(pattern: str) -> re.Pattern[str]:
    """A Python pattern that matches what RE2 ``pattern`` matches; raises :class:`UnsupportedPattern`."""
    return _python_pattern(_Re2Translator(pattern).translate())


def _check_regex(node: Node, opset: int) -> str | None:
    pattern = node.attrs.get("pattern")
    if not isinstance(pattern, str):
        return "pattern is not UTF-8 text"
    try:
        compile_re2(pattern)
    except UnsupportedPattern as error:
        return f"pattern {pattern!r}: {error}"
    return None


@KERNELS.register("RegexFullMatch", since=20, check=_check_regex)
def _regex_full_match(ctx: KernelContext, x: Array) -> Array:
    pattern = compile_re2(ctx.attrs["pattern"])
    matched = (pattern.fullmatch(text) is not None for text in x.reshape(-1))
    return np.fromiter(matched, dtype=np.bool_, count=x.size).reshape(x.shape)


# TfIdfVectorizer --------------------------------------------------------------------------

_TFIDF_MODES = ("TF", "IDF", "TFIDF")


@dataclass(frozen=True)
class _NgramPool:
    """The n-grams a TfIdfVectorizer counts: per length, an ``(k, n)`` array of item ids
    and the output column of each; strings are numbered by ``vocabulary``."""

    grams: dict[int, tuple[Array, Array]]
    vocabulary: dict[str, int] | None

    @classmethod
    def of(cls, attrs: dict[str, Any]) -> _NgramPool:
        strings = attrs.get("pool_strings")
        vocabulary = None if strings is None else {text: i for i, text in enumerate(dict.fromkeys(strings))}
        items = (
            np.array([vocabulary[text] for text in strings], dtype=np.int64)
            if vocabulary is not None and strings is not None
            else np.asarray(attrs.get("pool_int64s") or [], dtype=np.int64)
        )
        columns = np.asarray(attrs["ngram_indexes"], dtype=np.int64)
        grams, first = {}, 0
        for length, (begin, end) in _levels(attrs["ngram_counts"], len(items)):
            level = items[begin:end].reshape(-1, length)
            grams[length] = (level, columns[first : first + len(level)])
            first += len(level)
        return cls(grams, vocabulary)

    def ids(self, x: Array) -> Array:
        """Item ids of the input; strings outside the pool get an id no n-gram uses."""
        if self.vocabulary is None:
            return x.astype(np.int64)
        unknown = len(self.vocabulary)
        return np.array([self.vocabulary.get(text, unknown) for text in x.reshape(-1)], np.int64).reshape(
            x.shape
        )


def _levels(ngram_counts: Sequence[int], pool_size: int) -> list[tuple[int, tuple[int, int]]]:
    """``(n, (begin, end))`` for each n-gram length: where its n-grams lie in the pool."""
    return list(enumerate(itertools.pairwise([*ngram_counts, pool_size]), start=1))


def _check_tfidf(node: Node, opset: int) -> str | None:
    attrs = node.attrs
    if attrs.get("mode") not in _TFIDF_MODES:
        return f"mode={attrs.get('mode')!r} is not one of {list(_TFIDF_MODES)}"
    if (attrs.get("pool_strings") is None) == (attrs.get("pool_int64s") is None):
        return "exactly one of pool_strings and pool_int64s must be given"
    pool = attrs.get("pool_strings") or attrs.get("pool_int64s") or []
    levels = [(end - begin, n) for n, (begin, end) in _levels(attrs.get("ngram_counts", []), len(pool))]
    if any(size < 0 or size % n for size, n in levels):
        return "ngram_counts do not split the pool into whole n-grams"
    grams = sum(size // n for size, n in levels)
    if len(attrs.get("ngram_indexes", [])) != grams or min(attrs.get("ngram_indexes", [0]), default=0) < 0:
        return f"ngram_indexes must give one non-negative column for each of the {grams} n-grams"
    if attrs.get("weights") is not None and len(attrs["weights"]) != grams:
        return f"weights must give one weight for each of the {grams} n-grams"
    if not 1 <= attrs.get("min_gram_length", 0) <= attrs.get("max_gram_length", 0):
        return "gram lengths must satisfy 1 <= min_gram_length <= max_gram_length"
    return None


def _match_rows(candidates: Array, grams: Array) -> Array:
    """For each row of ``candidates``, the index of the equal row of ``grams``, or -1."""
    if not len(candidates) or not len(grams):
        return np.full(len(candidates), -1, dtype=np.int64)
    _, inverse = np.unique(np.concatenate([grams, candidates]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    lookup = np.full(int(inverse.max()) + 1, -1, dtype=np.int64)
    lookup[inverse[: len(grams)]] = np.arange(len(grams))
    return lookup[inverse[len(grams) :]]


def _skip_grams(ids: Array, length: int, skip: int) -> Array:
    """``(N, starts, length)``: every n-gram of each row whose items lie ``skip`` apart."""
    step = skip + 1
    starts = ids.shape[1] - (length - 1) * step
    return np.stack([ids[:, j * step : j * step + starts] for j in range(length)], axis=-1)


def _count_ngrams(ids: Array, pool: _NgramPool, attrs: dict[str, Any], width: int) -> Array:
    """``(N, width)`` counts of each pool n-gram, every skip distance counted (unigrams once)."""
    counts = np.zeros((ids.shape[0], width), dtype=np.float32)
    for length in range(attrs["min_gram_length"], attrs["max_gram_length"] + 1):
        if length not in pool.grams:
            continue
        grams, columns = pool.grams[length]
        skips = range(attrs["max_skip_count"] + 1) if length > 1 else (0,)
        for skip in skips:
            if ids.shape[1] < (length - 1) * (skip + 1) + 1:
                break
            windows = _skip_grams(ids, length, skip)
            found = _match_rows(windows.reshape(-1, length), grams)
            rows = np.repeat(np.arange(ids.shape[0]), windows.shape[1])
            np.add.at(counts, (rows[found >= 0], columns[found[found >= 0]]), 1)
    return counts


@KERNELS.register("TfIdfVectorizer", since=9, check=_check_tfidf)
def _tfidf_vectorizer(ctx: KernelContext, x: Array) -> Array:
    attrs = ctx.attrs
    if x.ndim not in (1, 2):
        raise ValueError(f"TfIdfVectorizer takes a [C] or [N, C] input, got shape {list(x.shape)}")
    pool = _NgramPool.of(attrs)
    indexes: Sequence[int] = attrs["ngram_indexes"]
    width = max(indexes, default=-1) + 1
    counts = _count_ngrams(pool.ids(x if x.ndim == 2 else x[None]), pool, attrs, width)
    if attrs["mode"] != "TF":
        weights = np.ones(width, dtype=np.float32)
        if attrs.get("weights") is not None:
            weights[np.asarray(indexes)] = attrs["weights"]
        counts = (counts > 0 if attrs["mode"] == "IDF" else counts) * weights
    return counts.astype(np.float32, copy=False).reshape(*x.shape[:-1], width)
