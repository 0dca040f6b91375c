"""The fallback lane: a backend checked with a second one for the nodes it refuses, under both
backends' expected failures, from ``spawnml conformance --fallback`` and from pytest.

The lane run here is the example plugin's (tests/plugins/spawnml-example-plugin) with the CPU
backend behind it: the example's file lists the opset-6 Add cases as refusals, which the CPU
runs in the fallback lane.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from spawnml import plugins
from spawnml.cli import main
from spawnml.conformance import ExpectedFailures, Verdict
from spawnml.conformance.runner import Outcome, Status

OWN = ExpectedFailures.parse(
    '[cases]\nown_fails = "the backend\'s kernel"\n[refusals]\nown_refused = "no kernel at opset 6"\n',
    "own.toml",
)
FALLBACK = ExpectedFailures.parse(
    '[cases]\nfallback_fails = "the fallback\'s kernel"\nown_fails = "both"\n[refusals]\nboth = "x"\n',
    "fallback.toml",
)
LANE = OWN.with_fallback(FALLBACK, "cpu")
#: The example backend's refusals the CPU runs in the fallback lane (pytorch-operator cases).
OPSET_6_ADD = {
    "test_operator_add_broadcast",
    "test_operator_add_size1_broadcast",
    "test_operator_add_size1_right_broadcast",
    "test_operator_add_size1_singleton_broadcast",
    "test_operator_non_float_params",
}


#: The lane's backends and the format of its cases: other installed plugins stay out.
SELECTED = "cpu,example,onnx"


@pytest.fixture(autouse=True)
def fresh_plugins(monkeypatch):
    monkeypatch.setenv("SPAWNML_PLUGINS", SELECTED)
    plugins.reset()
    yield
    plugins.reset()


def verdict(case: str, status: Status) -> Verdict:
    return LANE.verdict(Outcome(case, "node", "example+cpu", status))


@pytest.mark.parametrize(
    ("case", "status", "expected"),
    [
        # The backend's own failures stay required: one that passes is an unexpected pass.
        ("own_fails", Status.FAIL, Verdict.EXPECTED),
        ("own_fails", Status.PASS, Verdict.UNEXPECTED_PASS),
        # The fallback's may happen (its kernel runs only where the backend refuses the node).
        ("fallback_fails", Status.FAIL, Verdict.EXPECTED),
        ("fallback_fails", Status.ERROR, Verdict.EXPECTED),
        ("fallback_fails", Status.PASS, Verdict.PASS),
        # The backend's refusals may load (the fallback runs them), and are judged by the run.
        ("own_refused", Status.REFUSED, Verdict.REFUSED),
        ("own_refused", Status.PASS, Verdict.PASS),
        ("own_refused", Status.FAIL, Verdict.FAIL),
        # Refused in the lane means refused by the backend alone: its file must list it.
        ("both", Status.REFUSED, Verdict.UNEXPECTED_REFUSAL),
        ("unlisted", Status.REFUSED, Verdict.UNEXPECTED_REFUSAL),
        ("unlisted", Status.FAIL, Verdict.FAIL),
        ("unlisted", Status.SKIPPED, Verdict.SKIPPED),
    ],
)
def test_both_files_compose_into_the_lanes_expectations(case, status, expected):
    assert verdict(case, status) is expected


def test_the_composed_expectations_say_why_and_where_from():
    assert LANE.reason("own_fails") == "the backend's kernel" and LANE.required("own_fails")
    assert LANE.reason("fallback_fails") == "cpu: the fallback's kernel" and not LANE.required(
        "fallback_fails"
    )
    assert LANE.refusal("own_refused") == "no kernel at opset 6"
    assert LANE.source == "own.toml with cpu's fallback.toml"
    untracked = ExpectedFailures.parse('[cases]\na = "why"\n', "untracked.toml").with_fallback(
        FALLBACK, "cpu"
    )
    assert untracked.verdict(Outcome("unlisted", "node", "x", Status.REFUSED)) is Verdict.REFUSED


def run_command(tmp_path, *extra: str) -> dict:
    args = ["conformance", "--backend", "example", "--kind", "pytorch-operator", "--out", str(tmp_path)]
    assert main([*args, *extra]) == 0
    name = "example+cpu" if extra else "example"
    return json.loads((tmp_path / f"conformance-{name}.json").read_text(encoding="utf-8"))


def statuses(report: dict) -> dict[str, str]:
    return {case["name"]: case["verdict"] for case in report["cases"]}


def test_the_command_runs_the_backends_refusals_on_the_fallback(tmp_path, capsys):
    alone = statuses(run_command(tmp_path))
    assert {case for case, verdict in alone.items() if verdict == "refused"} == OPSET_6_ADD
    mixed = statuses(run_command(tmp_path, "--fallback", "cpu"))
    assert mixed.keys() == alone.keys() and set(mixed.values()) == {"pass"}


def test_pytest_takes_the_fallback_too(tmp_path):
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "spawnml.conformance",
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    lane = ["--backend", "example", "--conformance-kind", "pytorch-operator", "--fallback", "cpu"]
    env = {**os.environ, "SPAWNML_PLUGINS": SELECTED}
    done = subprocess.run(
        [*command, *lane], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "example+cpu-test_operator_add_broadcast" not in done.stdout  # passed: not in the summary
    assert f"{len(OPSET_6_ADD)} passed" in done.stdout.splitlines()[-1], done.stdout
    unknown = subprocess.run(
        [*command, *lane[:-1], "gpu9"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert unknown.returncode != 0 and "--fallback 'gpu9' is not installed" in unknown.stderr + unknown.stdout
