"""Reports: verdict counts per case kind and per operator, as a text table, JSON and Markdown.

A case counts under every operator it uses, except that a refused case counts only under
the operators its refusal names; operators of ai.onnx come first, then the other domains'.
Totals count cases, once each. The onnxruntime column counts the cases onnxruntime passes
out of those it ran (cases whose reference is onnxruntime itself are not run on it).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .expectations import Verdict
from .runner import Status
from .suite import Result

COLUMNS = tuple(Verdict)
#: How much of a problem's message the text and Markdown reports show.
MESSAGE_CHARS = 300


@dataclass
class Tally:
    """Verdict counts of one row: a kind, an operator, or the total."""

    label: str
    counts: Counter[Verdict] = field(default_factory=Counter)
    onnxruntime_run: int = 0
    onnxruntime_pass: int = 0

    def add(self, result: Result) -> None:
        self.counts[result.verdict] += 1
        if result.onnxruntime is not None:
            self.onnxruntime_run += 1
            self.onnxruntime_pass += result.onnxruntime.status is Status.PASS

    @property
    def cases(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"label": self.label, "cases": self.cases}
        row.update({verdict.value: self.counts[verdict] for verdict in COLUMNS})
        row["onnxruntime_run"] = self.onnxruntime_run
        row["onnxruntime_pass"] = self.onnxruntime_pass
        return row

    def cells(self, compared: bool) -> list[str]:
        cells = [self.label, str(self.cases), *(str(self.counts[verdict]) for verdict in COLUMNS)]
        if compared:
            cells.append(f"{self.onnxruntime_pass}/{self.onnxruntime_run}" if self.onnxruntime_run else "-")
        return cells


def tally(results: Iterable[Result], keys: Callable[[Result], Iterable[str]]) -> dict[str, Tally]:
    """One row per key, in order of first appearance; each result counts under all its keys."""
    rows: dict[str, Tally] = {}
    for result in results:
        for key in keys(result):
            rows.setdefault(key, Tally(key)).add(result)
    return rows


def _operators(result: Result) -> Iterable[str]:
    return result.outcome.refused or result.outcome.operators


@dataclass(frozen=True)
class Report:
    """The results of one suite run on one backend."""

    backend: str
    device: str
    results: list[Result]
    compared_onnxruntime: bool = False
    versions: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the suite passes: no unexpected failure, no unexpected pass."""
        return all(result.verdict.ok for result in self.results)

    def totals(self) -> Tally:
        return tally(self.results, lambda _: ["total"]).get("total", Tally("total"))

    def by_kind(self) -> list[Tally]:
        return list(tally(self.results, lambda result: [result.outcome.kind]).values())

    def by_operator(self) -> list[Tally]:
        rows = tally(self.results, _operators)
        return [rows[name] for name in sorted(rows, key=lambda name: ("::" in name, name.lower()))]

    def problems(self) -> list[Result]:
        """The results that fail the suite."""
        return [result for result in self.results if not result.verdict.ok]

    # -- renderings -------------------------------------------------------------------------
    def tables(self) -> list[tuple[str, list[str], list[list[str]]]]:
        """``(first column, headers, rows)`` of the kind and operator tables, totals last."""
        columns = [verdict.value for verdict in COLUMNS]
        if self.compared_onnxruntime:
            columns.append("onnxruntime pass")
        total = self.totals().cells(self.compared_onnxruntime)
        return [
            (
                first,
                [first, "cases", *columns],
                [*(row.cells(self.compared_onnxruntime) for row in rows), total],
            )
            for first, rows in (("kind", self.by_kind()), ("operator", self.by_operator()))
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "device": self.device,
            "versions": dict(self.versions),
            "ok": self.ok,
            "totals": self.totals().to_dict(),
            "kinds": [row.to_dict() for row in self.by_kind()],
            "operators": [row.to_dict() for row in self.by_operator()],
            "cases": [_case_dict(result) for result in self.results],
        }

    def to_text(self) -> str:
        """The tables for a terminal, then what fails the suite and the verdict."""
        lines = [self.title(), ""]
        for _, headers, rows in self.tables():
            lines += [text_table(headers, rows), ""]
        problems = self.problem_lines()
        if problems:
            lines += [f"{len(problems)} case(s) fail the suite:", *(f"  {line}" for line in problems), ""]
        return "\n".join([*lines, self.verdict_line()])

    def to_markdown(self) -> str:
        lines = [f"# {self.title()}", "", self.versions_line(), ""]
        for first, headers, rows in self.tables():
            lines += [f"## By {first}", "", markdown_table(headers, rows), ""]
        problems = [f"- `{line}`" for line in self.problem_lines()] or ["None."]
        lines += ["## Problems", "", *problems, ""]
        return "\n".join([*lines, self.verdict_line(), ""])

    def title(self) -> str:
        return f"SpawnML conformance: backend {self.backend} ({self.device})"

    def versions_line(self) -> str:
        return "Versions: " + ", ".join(f"{name} {version}" for name, version in self.versions.items())

    def problem_lines(self) -> list[str]:
        """One line per case that fails the suite: where, status, and (the start of) why."""
        lines = []
        for result in self.problems():
            outcome = result.outcome
            if result.verdict is Verdict.UNEXPECTED_PASS:
                message = f"passes, but is listed as an expected failure ({result.reason})"
            elif result.verdict is Verdict.UNEXPECTED_LOAD:
                message = f"loads, but is listed as an expected refusal ({result.refusal})"
            elif result.verdict is Verdict.UNEXPECTED_REFUSAL:
                message = "not listed as an expected refusal: " + " ".join(outcome.message.split())
                message = message[:MESSAGE_CHARS]
            else:
                message = " ".join(outcome.message.split())[:MESSAGE_CHARS]
            lines.append(f"{outcome.kind}/{outcome.case}: {outcome.status}: {message}")
        return lines

    def verdict_line(self) -> str:
        totals = self.totals()
        summary = ", ".join(f"{totals.counts[verdict]} {verdict.value}" for verdict in COLUMNS)
        return f"{'PASSED' if self.ok else 'FAILED'}: {totals.cases} cases: {summary}"

    def write(self, folder: Path) -> list[Path]:
        """Write ``conformance-<backend>.json`` and ``.md`` into ``folder``; return their paths."""
        folder.mkdir(parents=True, exist_ok=True)
        json_path = folder / f"conformance-{self.backend}.json"
        markdown_path = folder / f"conformance-{self.backend}.md"
        json_path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        markdown_path.write_text(self.to_markdown(), encoding="utf-8")
        return [json_path, markdown_path]


def _case_dict(result: Result) -> dict[str, Any]:
    outcome = result.outcome
    reference = result.onnxruntime
    return {
        "name": outcome.case,
        "kind": outcome.kind,
        "status": outcome.status.value,
        "verdict": result.verdict.value,
        "expected_failure": result.reason,
        "expected_refusal": result.refusal,
        "message": outcome.message,
        "operators": list(outcome.operators),
        "refused": list(outcome.refused),
        "seconds": round(outcome.seconds, 4),
        "onnxruntime": None
        if reference is None
        else {"status": reference.status.value, "message": reference.message},
    }


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    """Columns padded to their widest cell; the first left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        first, *rest = cells
        return "  ".join(
            [first.ljust(widths[0]), *(c.rjust(w) for c, w in zip(rest, widths[1:], strict=True))]
        )

    return "\n".join([line(headers), line(["-" * width for width in widths]), *map(line, rows)])


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return "\n".join(
        [line(headers), "|" + "|".join([":---", *["---:"] * (len(headers) - 1)]) + "|", *map(line, rows)]
    )
