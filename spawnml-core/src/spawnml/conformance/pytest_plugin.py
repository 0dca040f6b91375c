"""The pytest side of the kit: ``pytest --pyargs spawnml.conformance --backend NAME``.

Registered under the ``pytest11`` entry point, this module only adds options: pytest
runs that do not collect the suite are unaffected, and nothing here imports onnx. The
suite's items are one per case: expected failures are ``xfail(strict=True)`` with their
reason (so an unexpected pass fails), listed refusals and missing model files are skips
with the message (a missing file fails instead under ``SPAWNML_REQUIRE_MODELS=1``); where
the backend tracks refusals, an unlisted refusal and a listed one that loads fail. With
``--fallback NAME`` each case runs on the backend with NAME for the nodes it refuses, under both
backends' expectations (:meth:`~spawnml.conformance.expectations.ExpectedFailures.with_fallback`):
the fallback's failures are non-strict xfails.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from .case import KINDS, MODEL_KIND

if TYPE_CHECKING:
    from ..backend import Backend
    from .case import Case
    from .expectations import ExpectedFailures

#: Set to 1 to turn a missing reference-model file into a failure, as scripts/test does.
REQUIRE_MODELS_ENV = "SPAWNML_REQUIRE_MODELS"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("spawnml-conformance", "SpawnML conformance suite")
    group.addoption(
        "--backend",
        metavar="NAME",
        help="the installed SpawnML backend that `pytest --pyargs spawnml.conformance` checks",
    )
    group.addoption(
        "--fallback",
        metavar="NAME",
        help="a second SpawnML backend for the nodes --backend refuses (e.g. cpu): the fallback lane",
    )
    group.addoption(
        "--conformance-kind",
        action="append",
        choices=KINDS,
        metavar="KIND",
        help=f"case kinds of the conformance suite, repeatable (default: all of {', '.join(KINDS)})",
    )


def suite_params(
    backends: Iterable[str], kinds: Sequence[str] = KINDS, fallback: str | None = None
) -> Iterator[Any]:
    """``pytest.param(backend, case)`` for every case on every backend, marked as the backend says
    (and, with a ``fallback`` backend for the nodes it refuses, as both say).

    An unavailable backend gives one skipped param with its availability reason.
    """
    from .suite import check_expectations, lane, load_cases

    cases: list[Case] | None = None
    for name in backends:
        backend = _installed(name, "--backend")
        lanes = [backend] if fallback is None else [backend, _installed(fallback, "--fallback")]
        label = "+".join(b.name for b in lanes)
        down = next((b for b in lanes if not b.availability().available), None)
        if down is not None:
            skip = pytest.mark.skip(reason=f"{down.name}: {down.availability().reason}")
            yield pytest.param(name, None, id=label, marks=skip)
            continue
        cases = load_cases(kinds) if cases is None else cases
        for each in lanes:
            check_expectations(_expectations(each.name), cases, kinds)
        expected = _expectations(name, fallback)
        for case in lane(backend, cases, expected):
            reason = expected.reason(case.name)
            marks = [pytest.mark.xfail(strict=expected.required(case.name), reason=reason)] if reason else []
            yield pytest.param(name, case, id=f"{label}-{case.name}", marks=marks)


def _installed(name: str, option: str) -> Backend:
    """The loaded backend ``name``; a usage error saying why it is not loaded otherwise."""
    from ..plugins import backends, not_loaded

    if name not in backends():
        raise pytest.UsageError(
            f"{option} {name!r} {not_loaded('backend', name)} (loaded backends: {sorted(backends())})"
        )
    return backends()[name]


def check_case(backend: str, case: Case, fallback: str | None = None) -> None:
    """Run ``case`` on ``backend`` (with ``fallback`` for the nodes it refuses, if given) as a
    pytest test: pass, fail, or skip with the message."""
    from .expectations import Verdict
    from .runner import SpawnMLTarget, Status, run_case

    expected = _expectations(backend, fallback)
    outcome = run_case(case, SpawnMLTarget(backend, fallback))
    message = " ".join(outcome.message.split())  # one line in pytest's summary
    verdict = expected.verdict(outcome)
    if verdict is Verdict.UNEXPECTED_LOAD:
        pytest.fail(
            f"{outcome.status}{': ' + message if message else ''}; listed as an expected refusal "
            f"({expected.refusal(case.name)}): remove it from {expected.source}",
            pytrace=False,
        )
    if verdict is Verdict.UNEXPECTED_REFUSAL:
        pytest.fail(f"refused, and not listed in {expected.source} [refusals]: {message}", pytrace=False)
    if outcome.status is Status.PASS:
        return
    if outcome.status is Status.REFUSED:
        pytest.skip("refused: " + message)
    if outcome.status is Status.SKIPPED:
        if case.kind == MODEL_KIND and os.environ.get(REQUIRE_MODELS_ENV) == "1":
            pytest.fail(f"{REQUIRE_MODELS_ENV}=1 and {outcome.message}", pytrace=False)
        pytest.skip(outcome.message)
    pytest.fail(f"{outcome.status}: {outcome.message}", pytrace=False)


def _expectations(backend: str, fallback: str | None = None) -> ExpectedFailures:
    """The backend's expected failures and refusals, composed with the fallback's if given."""
    expected = _read(backend, _file_of(backend))
    if fallback is None:
        return expected
    return expected.with_fallback(_read(fallback, _file_of(fallback)), fallback)


def _file_of(backend: str) -> str:
    """Where the backend's expected-failures file is: what :func:`_read` caches by."""
    from ..plugins import backends

    return str(backends()[backend].expected_failures)


@functools.cache
def _read(backend: str, file: str) -> ExpectedFailures:
    """A backend's expectations, read once per backend and file (``file`` only keys the cache)."""
    from ..plugins import backends
    from .expectations import ExpectedFailures

    return ExpectedFailures.of_backend(backends()[backend])
