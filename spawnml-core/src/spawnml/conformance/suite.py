"""The suite: collect cases by kind, run them on a backend, apply its expected failures and refusals."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..backend import Backend
from ..errors import InvalidArgumentError
from .case import KINDS, MODEL_KIND, ONNX_KINDS, PROPERTY_KIND, Case
from .expectations import ExpectedFailures, Verdict
from .onnx_cases import onnx_cases
from .properties import property_cases
from .references import reference_cases
from .runner import OnnxRuntimeTarget, Outcome, SpawnMLTarget, operator_label, operators_of, run_case

LOADERS: dict[str, Callable[[], list[Case]]] = {
    **{kind: functools.partial(onnx_cases, kind) for kind in ONNX_KINDS},
    PROPERTY_KIND: property_cases,
    MODEL_KIND: reference_cases,
}


@dataclass(frozen=True)
class Result:
    """One case on the backend, what it means for the suite, and the same case on onnxruntime."""

    outcome: Outcome
    verdict: Verdict
    reason: str | None = None  # why the backend declares it an expected failure
    onnxruntime: Outcome | None = None  # None: not compared, skipped, or onnxruntime is the reference
    refusal: str | None = None  # why the backend declares it refuses the case


def load_cases(kinds: Sequence[str] = KINDS, match: str | None = None) -> list[Case]:
    """The cases of ``kinds`` (in the order of :data:`KINDS`) whose names match ``match``."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise InvalidArgumentError(f"unknown case kind(s) {unknown}; the kinds are {list(KINDS)}")
    cases = [case for kind in KINDS if kind in kinds for case in LOADERS[kind]()]
    if match is None:
        return cases
    pattern = re.compile(match)
    return [case for case in cases if pattern.search(case.name)]


def check_expectations(
    expected: ExpectedFailures, cases: Sequence[Case], kinds: Sequence[str], match: str | None = None
) -> None:
    """Refuse entries of ``expected`` that name no case, where ``cases`` are all of them (every
    kind, unfiltered); a run of some kinds cannot tell a stray entry from another kind's case."""
    if match is None and set(kinds) >= set(KINDS):
        expected.check_cases(case.name for case in cases)


def lane(backend: Backend, cases: Sequence[Case], expected: ExpectedFailures) -> list[Case]:
    """The cases ``backend`` is held to: all of them, or with ``native_only`` the cases whose
    operators all have a kernel of the backend's own (a case whose model cannot be read stays,
    so that running it reports why)."""
    if not expected.native_only:
        return list(cases)
    native = {operator_label(domain, op_type) for domain, op_type in backend.kernels.ops()}

    def claimed(case: Case) -> bool:
        try:
            return set(operators_of(case.model())) <= native
        except Exception:
            return True

    return [case for case in cases if claimed(case)]


def run_suite(
    backend: str,
    cases: Sequence[Case],
    expected: ExpectedFailures,
    compare_onnxruntime: bool = False,
    progress: Callable[[int, Result], None] | None = None,
    fallback: str | None = None,
) -> list[Result]:
    """Run every case on ``backend``, with ``fallback`` for the nodes it refuses if given (and on
    onnxruntime when asked); ``progress`` hears each."""
    target = SpawnMLTarget(backend, fallback)
    results = []
    for index, case in enumerate(cases):
        outcome = run_case(case, target)
        compared = compare_onnxruntime and case.expected is not None and not case.skip
        result = Result(
            outcome,
            expected.verdict(outcome),
            expected.reason(case.name),
            run_case(case, OnnxRuntimeTarget()) if compared else None,
            expected.refusal(case.name),
        )
        results.append(result)
        if progress is not None:
            progress(index, result)
    return results
