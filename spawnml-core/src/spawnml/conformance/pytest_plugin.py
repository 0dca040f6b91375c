"""The pytest side of the kit: ``pytest --pyargs spawnml.conformance --backend NAME``.

Registered under the ``pytest11`` entry point, this module only adds options: pytest
runs that do not collect the suite are unaffected, and nothing here imports onnx. The
suite's items are one per case: expected failures are ``xfail(strict=True)`` with their
reason (so an unexpected pass fails), listed refusals and missing model files are skips
with the message (a missing file fails instead under ``SPAWNML_REQUIRE_MODELS=1``); where
the backend tracks refusals, an unlisted refusal and a listed one that loads fail.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from .case import KINDS, MODEL_KIND

if TYPE_CHECKING:
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
        "--conformance-kind",
        action="append",
        choices=KINDS,
        metavar="KIND",
        help=f"case kinds of the conformance suite, repeatable (default: all of {', '.join(KINDS)})",
    )


def suite_params(backends: Iterable[str], kinds: Sequence[str] = KINDS) -> Iterator[Any]:
    """``pytest.param(backend, case)`` for every case on every backend, marked as the backend says.

    An unavailable backend gives one skipped param with its availability reason.
    """
    from ..plugins import backends as installed
    from ..plugins import not_loaded
    from .expectations import ExpectedFailures
    from .suite import check_expectations, lane, load_cases

    cases: list[Case] | None = None
    for name in backends:
        if name not in installed():
            raise pytest.UsageError(
                f"--backend {name!r} {not_loaded('backend', name)} (loaded backends: {sorted(installed())})"
            )
        backend = installed()[name]
        status = backend.availability()
        if not status.available:
            yield pytest.param(name, None, id=name, marks=pytest.mark.skip(reason=f"{name}: {status.reason}"))
            continue
        cases = load_cases(kinds) if cases is None else cases
        expected = ExpectedFailures.of_backend(backend)
        check_expectations(expected, cases, kinds)
        for case in lane(backend, cases, expected):
            reason = expected.reason(case.name)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(name, case, id=f"{name}-{case.name}", marks=marks)


def check_case(backend: str, case: Case) -> None:
    """Run ``case`` on ``backend`` as a pytest test: pass, fail, or skip with the message."""
    from ..plugins import backends
    from .expectations import Verdict
    from .runner import SpawnMLTarget, Status, run_case

    expected = _expectations(backend, backends()[backend].expected_failures)  # type: ignore[arg-type]  # a path: hashable
    outcome = run_case(case, SpawnMLTarget(backend))
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


@functools.cache
def _expectations(backend: str, file: object) -> ExpectedFailures:
    """The backend's expected failures and refusals, read once per backend and file."""
    from ..plugins import backends
    from .expectations import ExpectedFailures

    return ExpectedFailures.of_backend(backends()[backend])
