"""``bench/gpu_check.py``, the GPU machine's one prepared run: JUnit results read into conformance
lanes and refusal lists, the share of the CPU's cases, sections stopped at their deadline with a
report still written, and the CUDA probe's reason where cupy is missing."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import types
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load(name: str) -> ModuleType:
    """A bench/ module loaded by path (bench/ is no package) under a name of its own."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gc() -> ModuleType:
    return load("gpu_check")


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_conformance" name="test_conformance[cpu-test_add]"/>
<testcase classname="tests.test_conformance" name="test_conformance[cpu-test_relu]"/>
<testcase classname="tests.test_conformance" name="test_conformance[cpu-test_cast_X]"/>
<testcase classname="tests.test_conformance" name="test_conformance[cuda-test_add]"/>
<testcase classname="tests.test_conformance" name="test_conformance[cuda-test_relu]">
  <failure message="AssertionError: not close">trace</failure></testcase>
<testcase classname="tests.test_conformance" name="test_conformance[cuda-test_cast_X]">
  <skipped type="pytest.skip" message="refused: Cast to float8e4m3 is not supported">x</skipped></testcase>
<testcase classname="tests.test_conformance" name="test_conformance[cuda-test_cast_Y]">
  <skipped type="pytest.skip" message="refused: Cast to float8e4m3 is not supported">x</skipped></testcase>
<testcase classname="tests.test_conformance" name="test_conformance[cuda-test_dft]">
  <skipped type="pytest.xfail" message="stored reference off by rounding">x</skipped></testcase>
</testsuite></testsuites>
"""


def test_junit_results_become_a_lane_with_refusals_by_reason(gc, tmp_path):
    path = tmp_path / "j.xml"
    path.write_text(JUNIT)
    outcomes = gc.junit_outcomes(path)
    cuda = gc.summarize_conformance(outcomes, "cuda")
    assert cuda["counts"] == {"passed": 1, "failed": 1, "skipped": 2, "xfailed": 1}
    assert cuda["failed_cases"] == ["test_relu"]
    assert cuda["refusals"] == {
        "refused: Cast to float8e4m3 is not supported": ["test_cast_X", "test_cast_Y"]
    }
    cpu = gc.summarize_conformance(outcomes, "cpu")
    assert gc.against_cpu(cuda, cpu) == {"cpu_passed": 3, "passed_of_cpu": 1, "share_of_cpu": 0.3333}
    gc.write_refusals(tmp_path / "refusals-cuda.md", "cuda", cuda)
    text = (tmp_path / "refusals-cuda.md").read_text()
    assert "2 cases under 1 reasons" in text and "- test_cast_Y" in text


def test_a_missing_or_truncated_junit_file_reads_as_nothing(gc, tmp_path):
    assert gc.junit_outcomes(tmp_path / "absent.xml") == {}
    (tmp_path / "cut.xml").write_text(JUNIT[:200])
    assert gc.junit_outcomes(tmp_path / "cut.xml") == {}


def context(gc, tmp_path, budget=60.0):
    return gc.Context(tmp_path, sys.executable, True, time.monotonic() + budget, 1)


def test_a_child_past_its_deadline_is_stopped_and_the_section_says_so(gc, tmp_path):
    ctx = context(gc, tmp_path)
    result = gc.Result("sleepy", 1.0)
    start = time.monotonic()
    code = gc.run_child(
        ctx, result, [sys.executable, "-c", "import time; print('begun', flush=True); time.sleep(60)"], 1.0
    )
    assert code is None and time.monotonic() - start < 15
    gc._finish(result, code)
    assert result.status == "timeout" and "deadline" in result.reason
    assert "begun" in (tmp_path / "sleepy.log").read_text()


def test_sections_run_in_turn_with_a_report_after_each(gc, tmp_path, monkeypatch):
    seen = []

    def passing(ctx, result):
        seen.append(json.loads((ctx.out / "gpu-check.json").read_text())["state"])
        result.status, result.summary = "passed", {"counts": {"passed": 3}}

    def hanging(ctx, result):
        gc._finish(
            result,
            gc.run_child(
                ctx,
                result,
                [sys.executable, "-c", "import time; print('still going', flush=True); time.sleep(60)"],
                result.budget,
            ),
        )

    def broken(ctx, result):
        raise RuntimeError("no device")

    monkeypatch.setattr(
        gc,
        "SECTIONS",
        [
            gc.Section("one", 5, 5, passing),
            gc.Section("two", 1, 1, hanging),
            gc.Section("three", 5, 5, broken),
        ],
    )
    monkeypatch.setattr(gc, "GRACE", 1.0)
    code = gc.main(["--out", str(tmp_path), "--rehearse", "--budget", "60", "--workers", "1"])
    assert code == 1 and seen == ["running"]
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    assert report["state"] == "finished" and report["rehearse"] is True
    assert [(s["name"], s["status"]) for s in report["sections"]] == [
        ("one", "passed"),
        ("two", "timeout"),
        ("three", "failed"),
    ]
    assert report["sections"][2]["reason"] == "RuntimeError: no device"
    assert report["sections"][1]["log_tail"].startswith("still going")
    text = (tmp_path / "gpu-check.md").read_text()
    assert "# gpu-check: rehearsal" in text and "| one | passed |" in text and "3 passed" in text
    (tmp_path / "gpu-check.md").unlink()
    assert gc.main(["render", str(tmp_path / "gpu-check.json")]) == 0
    assert (tmp_path / "gpu-check.md").read_text() == text


def test_sections_past_the_run_budget_are_skipped_with_the_reason(gc, tmp_path, monkeypatch):
    def passing(ctx, result):
        result.status = "passed"

    monkeypatch.setattr(gc, "SECTIONS", [gc.Section("one", 5, 5, passing)])
    assert gc.main(["--out", str(tmp_path), "--budget", "1", "--workers", "1"]) == 0
    (section,) = json.loads((tmp_path / "gpu-check.json").read_text())["sections"]
    assert section["status"] == "skipped" and section["reason"] == "no time left in the run's budget"


def test_lanes_of_unavailable_backends_skip_with_the_backends_reason(gc, tmp_path):
    ctx = context(gc, tmp_path)
    ctx.availability = {
        "cuda": {"available": False, "reason": "cupy is not importable: No module named 'cupy'"}
    }
    for run in (gc.conformance("cuda"), gc.bench("cuda"), gc.cuda_probe_section):
        result = gc.Result("x", 5)
        run(ctx, result)
        assert result.status == "skipped"
        assert result.reason == "cuda is unavailable here: cupy is not importable: No module named 'cupy'"


def test_the_cuda_probe_reports_why_it_did_not_run_without_cupy():
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("cupy is installed: the probe runs on the GPU machine")
    probe = load("gpu_probe")
    found = probe.probe_cuda(8)
    assert found["available"] is False and found["reason"].startswith("cupy is not importable")


def test_the_script_is_valid_bash():
    script = BENCH.parent / "scripts" / "gpu-check"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0


def test_a_conformance_lane_is_measured_against_the_cpu_lane(gc, tmp_path, monkeypatch):
    def fake_pytest(ctx, result, command, limit, env=None):
        junit = next(arg for arg in command if arg.startswith("--junitxml="))
        Path(junit.removeprefix("--junitxml=")).write_text(JUNIT)
        result.log = f"{result.name}.log"
        (ctx.out / result.log).write_text("1 failed\n")
        return 1 if "cuda" in command else 0  # pytest's status: 1 when a test failed

    monkeypatch.setattr(gc, "run_child", fake_pytest)
    ctx = context(gc, tmp_path)
    ctx.availability = {"cuda": {"available": True, "device": "NVIDIA H200"}}
    cpu, cuda = gc.Result("conformance-cpu", 5), gc.Result("conformance-cuda", 5)
    gc.conformance("cpu")(ctx, cpu)
    gc.conformance("cuda")(ctx, cuda)
    assert cpu.status == "passed" and cpu.summary["passed_cases_count"] == 3
    assert cuda.status == "failed" and cuda.reason == "1 cases failed"
    assert cuda.summary["share_of_cpu"] == 0.3333 and cuda.summary["meets_97_percent"] is False
    assert "- test_cast_X" in (tmp_path / "refusals-cuda.md").read_text()
    assert "below the 97% bar" in gc._one_line(gc.asdict(cuda))


def test_the_cuda_probe_captures_and_replays_through_cupys_stream_api(monkeypatch):
    """The probe's path on a GPU, over a stand-in for cupy that computes with numpy and records
    the capture calls: eager chain, capture, one upload replay and one timed replay."""
    import numpy as np

    calls: list[str] = []

    class Graph:
        def launch(self, stream):
            calls.append("launch")

    class Stream:
        def __init__(self, non_blocking=False):
            assert non_blocking

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def synchronize(self):
            calls.append("synchronize")

        def begin_capture(self):
            calls.append("begin_capture")

        def end_capture(self):
            calls.append("end_capture")
            return Graph()

    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 1,
        runtimeGetVersion=lambda: 13000,
        getDeviceProperties=lambda device: {"name": b"Stand-in GPU"},
    )
    fake = types.SimpleNamespace(
        __version__="0.0",
        float32=np.float32,
        matmul=np.matmul,
        array_equal=np.array_equal,
        random=types.SimpleNamespace(default_rng=np.random.default_rng),
        cuda=types.SimpleNamespace(runtime=runtime, Stream=Stream, device=None),
    )
    monkeypatch.setitem(sys.modules, "cupy", fake)
    found = load("gpu_probe").probe_cuda(16)
    assert found["available"] is True and found["device"] == "Stand-in GPU"
    assert found["graph_capture"] is True and found["graph_equals_eager"] is True
    assert calls.count("begin_capture") == 1 and calls.count("launch") == 2
    assert found["eager_host_us_per_launch"] > 0 and "graph_host_us_per_replay" in found


def test_a_pytest_run_stopped_at_its_deadline_still_leaves_its_junit_file(gc, tmp_path, monkeypatch):
    """The deadline interrupts pytest, which ends its session and writes the cases it ran."""
    (tmp_path / "test_slow.py").write_text(
        "import time\n\ndef test_quick():\n    pass\n\ndef test_slow():\n    time.sleep(60)\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the repository's configuration
    monkeypatch.setattr(gc, "GRACE", 10.0)
    # pytest's own start must fit well inside the deadline on a loaded machine: no plugins.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    ctx = context(gc, tmp_path)
    result = gc.Result("slow", 8.0)
    junit = tmp_path / "slow.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"]
    command += [
        "--rootdir",
        str(tmp_path),
        "-c",
        str(tmp_path / "pytest.ini"),
        str(tmp_path / "test_slow.py"),
    ]
    assert gc.run_child(ctx, result, command, 8.0) is None
    outcomes = gc.junit_outcomes(junit)
    assert outcomes["test_quick"] == ("passed", "")
