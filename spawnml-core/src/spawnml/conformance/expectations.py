"""Expected failures: the cases a backend declares it fails, each with its reason.

A backend points :attr:`spawnml.backend.Backend.expected_failures` at one TOML file::

    [cases]
    test_name = "reason"

A listed case that fails is *expected*; a listed case that passes is an *unexpected
pass* and fails the suite, so the file stays honest; an unlisted failure fails the
suite. Refusals and skips are neither, whether listed or not.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
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
    SKIPPED = "skipped"

    @property
    def ok(self) -> bool:
        """Whether the suite accepts this verdict."""
        return self not in (Verdict.FAIL, Verdict.UNEXPECTED_PASS)


@dataclass(frozen=True)
class ExpectedFailures:
    """Case name -> why the backend is expected to fail it."""

    reasons: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    @classmethod
    def parse(cls, text: str, source: str) -> ExpectedFailures:
        """Read the TOML text of an expected-failures file; ``source`` names it in errors."""
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise PluginError(f"expected-failures file {source}: {error}") from None
        extra = sorted(set(document) - {"cases"})
        if extra:
            raise PluginError(f"expected-failures file {source}: unknown table(s) {extra}; only [cases]")
        cases = document.get("cases", {})
        bad = sorted(name for name, reason in cases.items() if not isinstance(reason, str) or not reason)
        if bad:
            raise PluginError(f"expected-failures file {source}: give each case a reason string: {bad}")
        return cls(dict(cases), source)

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

    def reason(self, case: str) -> str | None:
        """Why ``case`` is expected to fail, or None when it is not listed."""
        return self.reasons.get(case)

    def verdict(self, outcome: Outcome) -> Verdict:
        """What ``outcome`` means for the suite."""
        listed = outcome.case in self.reasons
        if outcome.status is Status.PASS:
            return Verdict.UNEXPECTED_PASS if listed else Verdict.PASS
        if outcome.status in (Status.FAIL, Status.ERROR):
            return Verdict.EXPECTED if listed else Verdict.FAIL
        return Verdict.REFUSED if outcome.status is Status.REFUSED else Verdict.SKIPPED
