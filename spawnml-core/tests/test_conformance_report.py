"""Expected-failures bookkeeping and report writing of the conformance kit."""

from __future__ import annotations

import json

import pytest
from spawnml import PluginError, plugins
from spawnml.conformance import ExpectedFailures, Outcome, Report, Result, Status, Verdict

LISTED = ExpectedFailures({"test_listed": "known bug"}, "test")


def outcome(name: str, status: Status, kind: str = "node", operators=("Add",), refused=()) -> Outcome:
    return Outcome(name, kind, "mock", status, f"{status} message", tuple(operators), tuple(refused))


def result(name: str, status: Status, **kwargs) -> Result:
    found = outcome(name, status, **kwargs)
    return Result(found, LISTED.verdict(found), LISTED.reason(name))


# -- expected failures --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "listed", "verdict"),
    [
        (Status.PASS, False, Verdict.PASS),
        (Status.PASS, True, Verdict.UNEXPECTED_PASS),
        (Status.FAIL, False, Verdict.FAIL),
        (Status.FAIL, True, Verdict.EXPECTED),
        (Status.ERROR, False, Verdict.FAIL),
        (Status.ERROR, True, Verdict.EXPECTED),
        (Status.REFUSED, False, Verdict.REFUSED),
        (Status.REFUSED, True, Verdict.REFUSED),
        (Status.SKIPPED, False, Verdict.SKIPPED),
        (Status.SKIPPED, True, Verdict.SKIPPED),
    ],
)
def test_verdicts(status, listed, verdict):
    name = "test_listed" if listed else "test_other"
    assert LISTED.verdict(outcome(name, status)) is verdict
    assert verdict.ok is (verdict not in (Verdict.FAIL, Verdict.UNEXPECTED_PASS))


TRACKED = ExpectedFailures({"test_listed": "known bug"}, "test", {"test_refused": "no kernel"})


@pytest.mark.parametrize(
    ("name", "status", "verdict"),
    [
        ("test_refused", Status.REFUSED, Verdict.REFUSED),
        ("test_other", Status.REFUSED, Verdict.UNEXPECTED_REFUSAL),
        ("test_listed", Status.REFUSED, Verdict.UNEXPECTED_REFUSAL),
        ("test_refused", Status.PASS, Verdict.UNEXPECTED_LOAD),
        ("test_refused", Status.FAIL, Verdict.UNEXPECTED_LOAD),
        ("test_refused", Status.ERROR, Verdict.UNEXPECTED_LOAD),
        ("test_refused", Status.SKIPPED, Verdict.SKIPPED),
        ("test_other", Status.PASS, Verdict.PASS),
        ("test_listed", Status.FAIL, Verdict.EXPECTED),
    ],
)
def test_tracked_refusals(name, status, verdict):
    assert TRACKED.verdict(outcome(name, status)) is verdict
    assert verdict.ok is (verdict in (Verdict.REFUSED, Verdict.SKIPPED, Verdict.PASS, Verdict.EXPECTED))


def test_parse_reads_the_cases_table():
    text = '# comment\n[cases]\ntest_a = "reason a"\n"test_b.x" = "reason b"\n'
    expected = ExpectedFailures.parse(text, "file.toml")
    assert expected.reasons == {"test_a": "reason a", "test_b.x": "reason b"}
    assert expected.reason("test_a") == "reason a" and expected.reason("test_c") is None
    assert ExpectedFailures.parse("[cases]\n", "empty.toml").reasons == {}
    assert expected.refusals is None and not expected.native_only


def test_parse_reads_refusals_and_the_suite_table():
    text = '[refusals]\ntest_a = "no kernel"\n[suite]\nnative_only = true\n'
    expected = ExpectedFailures.parse(text, "file.toml")
    assert expected.refusals == {"test_a": "no kernel"} and expected.reasons == {}
    assert expected.refusal("test_a") == "no kernel" and expected.refusal("test_b") is None
    assert expected.native_only
    assert ExpectedFailures.parse("[refusals]\n", "empty.toml").refusals == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[cases\n", "file.toml: "),
        ('[cases]\ntest_a = "x"\n[other]\n', r"unknown table\(s\) \['other'\]"),
        ("[cases]\ntest_a = 1\n", r"give each case a reason string: \['test_a'\]"),
        ('[cases]\ntest_a = ""\n', r"give each case a reason string: \['test_a'\]"),
        ("[refusals]\ntest_a = 2\n", r"give each case a reason string: \['test_a'\]"),
        ('[cases]\ntest_a = "x"\n[refusals]\ntest_a = "y"\n', r"both failures and refusals: \['test_a'\]"),
        ("[suite]\nnative_only = 1\n", r"\[suite\] takes only native_only"),
        ("[suite]\nother = true\n", r"\[suite\] takes only native_only"),
    ],
)
def test_parse_refuses_malformed_files(text, message):
    with pytest.raises(PluginError, match=message):
        ExpectedFailures.parse(text, "file.toml")


def test_backends_declare_their_file(mock_plugins, tmp_path, monkeypatch):
    backend = plugins.backends()["mock"]
    assert ExpectedFailures.of_backend(backend).reasons == {}
    file = tmp_path / "expected.toml"
    file.write_text('[cases]\ntest_x = "mock cannot"\n', encoding="utf-8")
    monkeypatch.setattr(type(backend), "expected_failures", file)
    assert ExpectedFailures.of_backend(backend).reasons == {"test_x": "mock cannot"}
    monkeypatch.setattr(type(backend), "expected_failures", tmp_path / "absent.toml")
    with pytest.raises(PluginError, match=r"absent\.toml cannot be read"):
        ExpectedFailures.of_backend(backend)


# -- reports --------------------------------------------------------------------------------


def sample_report() -> Report:
    results = [
        result("test_add", Status.PASS, operators=("Add",)),
        result("test_mul_add", Status.FAIL, operators=("Add", "Mul")),
        result("test_listed", Status.FAIL, operators=("Mul",)),
        result("test_gemm", Status.REFUSED, operators=("Add", "Gemm"), refused=("Gemm",)),
        result("property_Add", Status.PASS, kind="property"),
        result("missing", Status.SKIPPED, kind="model", operators=()),
    ]
    compared = Outcome("test_add", "node", "onnxruntime", Status.PASS)
    results[0] = Result(results[0].outcome, results[0].verdict, None, compared)
    return Report("mock", "mock device", results, compared_onnxruntime=True, versions={"onnx": "1.0"})


def counts(row) -> dict[str, int]:
    return {verdict.value: count for verdict, count in row.counts.items() if count}


def test_rows_by_kind_and_operator():
    report = sample_report()
    kinds = {row.label: counts(row) for row in report.by_kind()}
    assert list(kinds) == ["node", "property", "model"]
    assert kinds["node"] == {"pass": 1, "fail": 1, "expected": 1, "refused": 1}
    operators = {row.label: counts(row) for row in report.by_operator()}
    assert list(operators) == ["Add", "Gemm", "Mul"]
    assert operators["Add"] == {"pass": 2, "fail": 1}  # the refused case counts under Gemm only
    assert operators["Gemm"] == {"refused": 1}
    assert operators["Mul"] == {"fail": 1, "expected": 1}
    totals = report.totals()
    assert totals.cases == 6 and (totals.onnxruntime_pass, totals.onnxruntime_run) == (1, 1)


def test_suite_fails_on_unlisted_failures_and_unexpected_passes():
    report = sample_report()
    assert not report.ok
    assert [r.outcome.case for r in report.problems()] == ["test_mul_add"]
    passing = Report("mock", "d", [result("test_add", Status.PASS), result("test_listed", Status.FAIL)])
    assert passing.ok
    honest = Report("mock", "d", [result("test_listed", Status.PASS)])
    assert not honest.ok
    assert "passes, but is listed as an expected failure (known bug)" in honest.problem_lines()[0]


def test_suite_fails_on_unlisted_refusals_and_listed_refusals_that_load():
    def tracked(name: str, status: Status) -> Result:
        found = outcome(name, status, refused=("Add",) if status is Status.REFUSED else ())
        return Result(found, TRACKED.verdict(found), None, None, TRACKED.refusal(name))

    report = Report("mock", "d", [tracked("test_refused", Status.REFUSED)])
    assert report.ok
    results = [tracked("test_other", Status.REFUSED), tracked("test_refused", Status.PASS)]
    report = Report("mock", "d", results)
    assert not report.ok
    new, stale = report.problem_lines()
    assert new == "node/test_other: refused: not listed as an expected refusal: refused message"
    assert stale == "node/test_refused: pass: loads, but is listed as an expected refusal (no kernel)"


def test_text_report_has_tables_problems_and_verdict():
    text = sample_report().to_text()
    assert "kind" in text and "operator" in text and "onnxruntime pass" in text
    assert "node/test_mul_add: fail: fail message" in text
    total_rows = [line.split() for line in text.splitlines() if line.startswith("total")]
    assert total_rows == [["total", "6", "2", "1", "1", "1", "0", "0", "0", "1", "1/1"]] * 2
    assert text.splitlines()[-1] == (
        "FAILED: 6 cases: 2 pass, 1 fail, 1 refused, 1 expected, 0 unexpected pass, "
        "0 unexpected refusal, 0 unexpected load, 1 skipped"
    )


def test_without_onnxruntime_there_is_no_onnxruntime_column():
    report = Report("mock", "d", [result("test_add", Status.PASS)])
    assert "onnxruntime" not in report.to_text()
    assert report.to_text().splitlines()[-1].startswith("PASSED: 1 cases")


def test_write_produces_json_and_markdown(tmp_path):
    report = sample_report()
    json_path, markdown_path = report.write(tmp_path / "out")
    assert json_path.name == "conformance-mock.json" and markdown_path.name == "conformance-mock.md"
    data = json.loads(json_path.read_text(encoding="utf-8"))
    assert data == json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is False and data["totals"]["cases"] == 6 and data["versions"] == {"onnx": "1.0"}
    case = next(c for c in data["cases"] if c["name"] == "test_listed")
    assert case["verdict"] == "expected" and case["expected_failure"] == "known bug"
    assert case["onnxruntime"] is None
    assert data["cases"][0]["onnxruntime"] == {"status": "pass", "message": ""}
    markdown = markdown_path.read_text(encoding="utf-8")
    assert "## By kind" in markdown and "## By operator" in markdown
    assert "| Gemm | 1 | 0 | 0 | 1 | 0 | 0 | 0 | 0 | 0 | - |" in markdown
    assert "- `node/test_mul_add: fail: fail message`" in markdown
