"""Expected failures and refusals: the cases a backend declares it fails or refuses, with reasons.

A backend points :attr:`spawnml.backend.Backend.expected_failures` at one TOML file::

    [cases]        # expected failures
    test_name = "reason"

    [refusals]     # cases refused at load
    test_other = "reason"

    [suite]        # optional
    native_only = true

A listed case that fails is *expected*; a listed case that passes is an *unexpected
pass* and fails the suite, so the file stays honest; an unlisted failure fails the
suite. Refusals work the same way once the file has a ``[refusals]`` table (even an
empty one): an unlisted refusal is an *unexpected refusal* (a dropped kernel turns
passes into refusals) and a listed case that loads is an *unexpected load*; both fail
the suite. Without the table, refusals are not tracked. ``native_only`` is for a backend
that runs a few operators and leaves the rest to later providers: its lane holds only
the cases whose operators all have a kernel of its own. Skips are never tracked.

Every entry of ``[cases]`` and ``[refusals]`` must name a case of the suite (of any kind,
in or out of a ``native_only`` lane): a misspelt or renamed case would otherwise be expected
to fail forever, unnoticed. A run of every kind refuses such a file (:meth:`check_cases`).

A fallback lane (the backend first, a second one for the nodes it refuses) reads both files
(:meth:`ExpectedFailures.with_fallback`): the backend's failures stay required; the fallback's
may happen (its kernels run only the nodes the backend refuses, so they may not be reached);
and the backend's listed refusals may load (the fallback takes them) or still be refused.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib.resources.abc import Traversable

from ..backend import Backend
from ..errors import PluginError
from .runner import Outcome, Status


class Verdict(StrEnum):
    """What an outcome means for the suite, once the expected failures are applied."""

    PASS = "pass"
    FAIL = "fail"
    REFUSED = "refused"
    EXPECTED = "expected"
    UNEXPECTED_PASS = "unexpected pass"
    UNEXPECTED_REFUSAL = "unexpected refusal"
    UNEXPECTED_LOAD = "unexpected load"
    SKIPPED = "skipped"

    @property
    def ok(self) -> bool:
        """Whether the suite accepts this verdict."""
        return self not in (
            Verdict.FAIL,
            Verdict.UNEXPECTED_PASS,
            Verdict.UNEXPECTED_REFUSAL,
            Verdict.UNEXPECTED_LOAD,
        )


@dataclass(frozen=True)
class ExpectedFailures:
    """Case name -> why the backend is expected to fail it; the same for refusals (None: untracked).

    ``may_fail`` and ``may_refuse`` are failures and refusals that are accepted, not required: a
    listed case that passes or loads is judged by its outcome (see :meth:`with_fallback`).
    """

    reasons: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    refusals: Mapping[str, str] | None = None
    native_only: bool = False
    may_fail: Mapping[str, str] = field(default_factory=dict)
    may_refuse: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, source: str) -> ExpectedFailures:
        """Read the TOML text of an expected-failures file; ``source`` names it in errors."""
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise PluginError(f"expected-failures file {source}: {error}") from None
        where = f"expected-failures file {source}"
        extra = sorted(set(document) - {"cases", "refusals", "suite"})
        if extra:
            raise PluginError(f"{where}: unknown table(s) {extra}; only [cases], [refusals] and [suite]")
        cases = _reasons(document.get("cases", {}), where)
        refusals = _reasons(document["refusals"], where) if "refusals" in document else None
        both = sorted(set(cases) & set(refusals or {}))
        if both:
            raise PluginError(f"{where}: cases listed as both failures and refusals: {both}")
        suite = document.get("suite", {})
        if set(suite) - {"native_only"} or not isinstance(suite.get("native_only", False), bool):
            raise PluginError(f"{where}: [suite] takes only native_only = true or false")
        return cls(cases, source, refusals, suite.get("native_only", False))

    @classmethod
    def read(cls, file: Traversable) -> ExpectedFailures:
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as error:
            raise PluginError(f"expected-failures file {file} cannot be read: {error}") from error
        return cls.parse(text, str(file))

    @classmethod
    def of_backend(cls, backend: Backend) -> ExpectedFailures:
        """The expected failures ``backend`` declares (none when it declares no file)."""
        file = backend.expected_failures
        return cls(source=f"{backend.name} declares none") if file is None else cls.read(file)

    def with_fallback(self, fallback: ExpectedFailures, name: str) -> ExpectedFailures:
        """The expectations of the lane where backend ``name`` runs the nodes this one refuses,
        ``fallback`` being its file. A case fails there where the backend's kernel fails (this
        file's ``[cases]``, still required), or where a node it refuses runs on the fallback and
        the fallback's kernel fails (``fallback``'s, accepted: whether the backend refuses that
        node is not in either file). A case is refused there only where both backends refuse
        one of its nodes, so only where the backend alone is refused: this file's
        ``[refusals]`` are accepted, not required, and an unlisted refusal stays unexpected.
        """
        return ExpectedFailures(
            self.reasons,
            f"{self.source} with {name}'s {fallback.source}",
            None if self.refusals is None else {},
            self.native_only,
            {case: f"{name}: {why}" for case, why in fallback.reasons.items() if case not in self.reasons},
            dict(self.refusals or {}),
        )

    def check_cases(self, names: Iterable[str]) -> None:
        """Refuse entries that name none of ``names`` (the cases of every kind)."""
        stray = sorted((set(self.reasons) | set(self.refusals or {})) - set(names))
        if stray:
            raise PluginError(
                f"expected-failures file {self.source}: {len(stray)} "
                f"{'entry names' if len(stray) == 1 else 'entries name'} no case of the suite: {stray}; "
                "correct or remove them"
            )

    def reason(self, case: str) -> str | None:
        """Why ``case`` is expected to fail (or may), or None when it is not listed."""
        return self.reasons.get(case, self.may_fail.get(case))

    def required(self, case: str) -> bool:
        """Whether ``case`` must fail: a pass of it is an unexpected pass."""
        return case in self.reasons

    def refusal(self, case: str) -> str | None:
        """Why ``case`` is expected to be refused (or may be), or None when it is not listed."""
        if self.refusals is None:
            return None
        return self.refusals.get(case, self.may_refuse.get(case))

    def verdict(self, outcome: Outcome) -> Verdict:
        """What ``outcome`` means for the suite."""
        if outcome.status is Status.SKIPPED:
            return Verdict.SKIPPED
        if outcome.status is Status.REFUSED:
            tracked = self.refusals is not None and self.refusal(outcome.case) is None
            return Verdict.UNEXPECTED_REFUSAL if tracked else Verdict.REFUSED
        if self.refusals is not None and outcome.case in self.refusals:
            return Verdict.UNEXPECTED_LOAD
        if outcome.status is Status.PASS:
            return Verdict.UNEXPECTED_PASS if self.required(outcome.case) else Verdict.PASS
        return Verdict.EXPECTED if self.reason(outcome.case) is not None else Verdict.FAIL


def _reasons(table: object, where: str) -> dict[str, str]:
    """A ``case = "reason"`` table, checked."""
    if not isinstance(table, dict):
        raise PluginError(f'{where}: [cases] and [refusals] are tables of case = "reason"')
    bad = sorted(name for name, reason in table.items() if not isinstance(reason, str) or not reason)
    if bad:
        raise PluginError(f"{where}: give each case a reason string: {bad}")
    return dict(table)
