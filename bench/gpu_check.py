"""The GPU backends on a GPU machine: conformance, real models, speed and launch overhead in one
time-boxed run that writes a JSON and a Markdown report as it goes.

Each section runs as a child process with its own deadline (its budget, cut to what is left of
the whole run's); at the deadline pytest is interrupted (so it still writes what it has) and the
process group is killed shortly after. After every section ``gpu-check.json`` and
``gpu-check.md`` are rewritten, so a run stopped from outside still leaves its report.

The machine is assumed to reach no package registry: what it lacks travels with the checkout in
``.gpu-check/`` (made here by ``--pack``: wheels of the packages the device image lacks, and the
model files the sections read, in the model cache's layout), and ``scripts/gpu-check`` installs it
offline into a fresh virtual environment on top of the system's Python.

``--rehearse`` runs the same sections with small budgets and a sample of the conformance cases,
for a machine with only software devices (Mesa's lavapipe, PoCL); lanes whose backend is
unavailable are reported as skipped with the backend's own reason.

Usage: python bench/gpu_check.py [--out DIR] [--rehearse] [--budget SECONDS] [--only NAME ...]
       python bench/gpu_check.py probe-cuda   (prints the CUDA probe's JSON; used by a section)
       python bench/gpu_check.py render REPORT.json ...   (rewrites REPORT.md from it)
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import functools
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GPU_BACKENDS = ("cuda", "webgpu", "opencl")
#: Conformance cases a rehearsal runs: a sample of the common operator families.
REHEARSAL_CASES = "test_add or test_relu or test_matmul or test_conv_ or test_softmax or test_cast_"
#: Seconds between interrupting a section and killing its process group.
GRACE = 10.0


@dataclass
class Result:
    """What one section did: its status is passed, failed, skipped, timeout or pending."""

    name: str
    budget: float
    status: str = "pending"
    seconds: float = 0.0
    reason: str = ""
    command: list[str] = field(default_factory=list)
    log: str = ""
    log_tail: str = ""
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """What every section sees: the options, the output folder and the run's overall deadline."""

    out: Path
    python: str
    rehearse: bool
    deadline: float
    workers: int
    availability: dict[str, dict[str, Any]] = field(default_factory=dict)

    def left(self) -> float:
        return self.deadline - time.monotonic()


@dataclass
class Section:
    name: str
    budget: float
    rehearse_budget: float
    run: Callable[[Context, Result], None]


# ----------------------------------------------------------------------------- running children


def run_child(
    ctx: Context, result: Result, command: list[str], limit: float, env: dict[str, str] | None = None
) -> int | None:
    """Run ``command`` in its own process group, logging to ``<out>/<section>.log``; at ``limit``
    seconds interrupt it (SIGINT: pytest then writes its reports), and kill the group ``GRACE``
    seconds later. The exit status, or None when the deadline was reached."""
    log_path = ctx.out / f"{result.name}.log"
    result.command = command
    result.log = log_path.name
    with log_path.open("w") as log:
        child = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        try:
            return child.wait(timeout=max(limit, 1.0))
        except BaseException as error:  # the deadline, or this process stopped from outside
            if not isinstance(error, subprocess.TimeoutExpired):
                _signal_group(child, signal.SIGKILL)
                raise
            # The child alone: pytest (and pytest-xdist's controller, which stops its workers)
            # then ends its session and writes its reports.
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout=GRACE)
            except subprocess.TimeoutExpired:
                _signal_group(child, signal.SIGKILL)
                child.wait()
            return None


def _signal_group(child: subprocess.Popen[Any], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, sig)


def tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ----------------------------------------------------------------------------- pytest results


def junit_outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """``test id -> (outcome, message)`` from a pytest JUnit XML file; outcome is passed, failed,
    error, skipped or xfailed. A missing or truncated file gives what could be read (nothing)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return {}
    outcomes: dict[str, tuple[str, str]] = {}
    for case in root.iter("testcase"):
        name = case.get("name", "")
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = ("failed" if child.tag == "failure" else "error"), child.get("message", "")
                break
            if child.tag == "skipped":
                kind = child.get("type", "")
                outcome = "xfailed" if kind == "pytest.xfail" else "skipped"
                message = child.get("message", "")
                break
        outcomes[name] = (outcome, message)
    return outcomes


def conformance_case(test_id: str) -> tuple[str, str] | None:
    """``(backend, case)`` of ``test_conformance[BACKEND-CASE]``, else None."""
    if not test_id.startswith("test_conformance[") or not test_id.endswith("]"):
        return None
    backend, _, case = test_id[len("test_conformance[") : -1].partition("-")
    return backend, case


def summarize_conformance(outcomes: dict[str, tuple[str, str]], backend: str) -> dict[str, Any]:
    """Counts per outcome, the failing cases and the refusals grouped by reason."""
    counts: collections.Counter[str] = collections.Counter()
    failed: list[str] = []
    refusals: dict[str, list[str]] = collections.defaultdict(list)
    passed: list[str] = []
    for test_id, (outcome, message) in sorted(outcomes.items()):
        parsed = conformance_case(test_id)
        if parsed is None or parsed[0] != backend:
            continue
        case = parsed[1]
        counts[outcome] += 1
        if outcome == "passed":
            passed.append(case)
        elif outcome in ("failed", "error"):
            failed.append(case)
        elif outcome == "skipped":
            refusals[_reason_key(message)].append(case)
    return {
        "counts": dict(counts),
        "passed_cases": passed,
        "failed_cases": failed,
        "refusals": dict(sorted(refusals.items(), key=lambda item: (-len(item[1]), item[0]))),
    }


def _reason_key(message: str) -> str:
    """A skip message without pytest's prefix, cut to one line."""
    message = message.removeprefix("Skipped: ").strip()
    return message.splitlines()[0][:300] if message else "(no reason given)"


def against_cpu(lane: dict[str, Any], cpu: dict[str, Any]) -> dict[str, Any]:
    """The share of the CPU's passing cases this lane passes, and the CPU-passing cases it does not."""
    cpu_passed = set(cpu.get("passed_cases", []))
    lane_passed = set(lane.get("passed_cases", []))
    if not cpu_passed:
        return {}
    return {
        "cpu_passed": len(cpu_passed),
        "passed_of_cpu": len(lane_passed & cpu_passed),
        "share_of_cpu": round(len(lane_passed & cpu_passed) / len(cpu_passed), 4),
    }


# ----------------------------------------------------------------------------- sections


def availability(ctx: Context, backend: str) -> tuple[bool, str]:
    state = ctx.availability.get(backend)
    if state is None:
        return False, "not probed (the environment section did not finish)"
    return bool(state.get("available")), str(state.get("reason") or state.get("device") or "")


def environment(ctx: Context, result: Result) -> None:
    """The machine, the driver, the versions and each backend's availability and device."""
    script = (
        "import json, platform, importlib.metadata as m, spawnml, spawnml.plugins as p\n"
        "out = {'python': platform.python_version(), 'versions': {}, 'backends': {}}\n"
        "for name in ('spawnml', 'numpy', 'onnx', 'onnxruntime', 'onnxruntime-gpu', 'torch', 'transformers',"
        " 'cupy-cuda12x', 'cupy-cuda13x', 'wgpu', 'pyopencl'):\n"
        "    try: out['versions'][name] = m.version(name)\n"
        "    except m.PackageNotFoundError: pass\n"
        "for name, b in sorted(p.backends().items()):\n"
        "    a = b.availability(); d = ''\n"
        "    if a.available:\n"
        "        try: d = b.device_name()\n"
        "        except Exception as e: d = f'device_name failed: {e}'\n"
        "    out['backends'][name] = {'available': a.available, 'reason': a.reason, 'device': d}\n"
        "print('JSON ' + json.dumps(out))\n"
    )
    code = run_child(ctx, result, [ctx.python, "-c", script], min(result.budget, ctx.left()))
    found = _json_line(ctx.out / result.log)
    smi = shutil.which("nvidia-smi")
    gpu = ""
    if smi:
        try:
            gpu = subprocess.run(
                [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as error:
            gpu = f"nvidia-smi failed: {error}"
    result.summary = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical cores",
        "nvidia_smi": gpu or "no nvidia-smi on the PATH",
        **(found or {}),
    }
    ctx.availability = (found or {}).get("backends", {})
    _finish(result, code, ok=found is not None)


def _json_line(path: Path) -> dict[str, Any] | None:
    for line in reversed(path.read_text(errors="replace").splitlines() if path.exists() else []):
        if line.startswith("JSON "):
            return dict(json.loads(line[5:]))
    return None


def _finish(result: Result, code: int | None, ok: bool = True) -> None:
    if code is None:
        result.status, result.reason = "timeout", f"stopped at its {result.budget:.0f} s deadline"
    elif code != 0 or not ok:
        result.status = "failed"
        result.reason = result.reason or f"exit status {code}"
    else:
        result.status = "passed"


def pytest_command(ctx: Context, junit: Path, *args: str) -> list[str]:
    workers = ["-n", str(ctx.workers)] if ctx.workers > 1 and has_xdist(ctx.python) else []
    return [
        ctx.python,
        "-m",
        "pytest",
        "-q",
        *workers,
        "-p",
        "no:cacheprovider",
        "-rfE",
        f"--junitxml={junit}",
        *args,
    ]


@functools.cache
def has_xdist(python: str) -> bool:
    """Whether ``python`` has pytest-xdist (else the tests run in one process)."""
    found = subprocess.run([python, "-c", "import xdist"], capture_output=True, timeout=60)
    return found.returncode == 0


def conformance(backend: str) -> Callable[[Context, Result], None]:
    def section(ctx: Context, result: Result) -> None:
        if backend != "cpu":
            available, reason = availability(ctx, backend)
            if not available:
                result.status, result.reason = "skipped", f"{backend} is unavailable here: {reason}"
                return
        junit = ctx.out / f"{result.name}.xml"
        select = f"{backend} and ({REHEARSAL_CASES})" if ctx.rehearse else backend
        command = pytest_command(ctx, junit, "tests/test_conformance.py", "-k", select)
        code = run_child(ctx, result, command, min(result.budget, ctx.left()))
        lane = summarize_conformance(junit_outcomes(junit), backend)
        result.summary = {key: value for key, value in lane.items() if key != "passed_cases"}
        result.summary["passed_cases_count"] = len(lane["passed_cases"])
        (ctx.out / f"{result.name}.cases.json").write_text(json.dumps(lane, indent=1) + "\n")
        if backend != "cpu":
            cpu = _load_lane(ctx.out / "conformance-cpu.cases.json")
            result.summary.update(against_cpu(lane, cpu))
            if "share_of_cpu" in result.summary:
                # The bar: 97% of the cases the CPU passes, none failing (the rest refused at load).
                result.summary["meets_97_percent"] = (
                    result.summary["share_of_cpu"] >= 0.97 and not lane["failed_cases"]
                )
            write_refusals(ctx.out / f"refusals-{backend}.md", backend, lane)
        # pytest exits 1 when a test failed; the lane's failures are in the summary.
        _finish(result, code, ok=not lane["failed_cases"])
        if result.status == "failed" and lane["failed_cases"]:
            result.reason = f"{len(lane['failed_cases'])} cases failed"

    return section


def _load_lane(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def write_refusals(path: Path, backend: str, lane: dict[str, Any]) -> None:
    """The cases ``backend`` refuses, by reason: the list to commit beside its expected failures."""
    lines = [f"# Conformance cases `{backend}` refuses", ""]
    refusals: dict[str, list[str]] = lane.get("refusals", {})
    lines.append(f"{sum(map(len, refusals.values()))} cases under {len(refusals)} reasons.")
    for reason, cases in refusals.items():
        lines += ["", f"## {reason} ({len(cases)})", "", *(f"- {case}" for case in cases)]
    path.write_text("\n".join(lines) + "\n")


def tests_section(
    paths: list[str], keyword: Callable[[Context], tuple[str | None, str]]
) -> Callable[[Context, Result], None]:
    """A pytest run over ``paths`` selected by ``keyword(ctx)``: a ``-k`` expression, or None to
    skip the section, and the reason to skip it."""

    def section(ctx: Context, result: Result) -> None:
        select, why = keyword(ctx)
        if select is None:
            result.status, result.reason = "skipped", why
            return
        junit = ctx.out / f"{result.name}.xml"
        env = {"SPAWNML_REQUIRE_MODELS": os.environ.get("SPAWNML_REQUIRE_MODELS", "1")}
        code = run_child(
            ctx, result, pytest_command(ctx, junit, *paths, "-k", select), min(result.budget, ctx.left()), env
        )
        outcomes = junit_outcomes(junit)
        counts = collections.Counter(outcome for outcome, _ in outcomes.values())
        failed = sorted(name for name, (outcome, _) in outcomes.items() if outcome in ("failed", "error"))
        result.summary = {"counts": dict(counts), "failed": failed}
        _finish(result, code, ok=not failed)

    return section


def available_gpus(ctx: Context) -> list[str]:
    return [name for name in GPU_BACKENDS if availability(ctx, name)[0]]


def gpu_keyword(ctx: Context) -> tuple[str | None, str]:
    names = available_gpus(ctx)
    return (" or ".join(names) if names else None), "no GPU backend is available here"


def cuda_keyword(ctx: Context) -> tuple[str | None, str]:
    available, reason = availability(ctx, "cuda")
    return ("cuda or render" if available else None), f"cuda is unavailable here: {reason}"


def bench(backend: str) -> Callable[[Context, Result], None]:
    def section(ctx: Context, result: Result) -> None:
        available, reason = availability(ctx, backend)
        if not available:
            result.status, result.reason = "skipped", f"{backend} is unavailable here: {reason}"
            return
        rows = ctx.out / f"{result.name}.json"
        sizes = (
            ["--runs", "2", "--det-size", "96", "--only", "int8,det"]
            if ctx.rehearse
            else ["--runs", "20", "--det-size", "640"]
        )
        command = [ctx.python, "bench/gpu.py", "--backend", backend, *sizes, "--json", str(rows)]
        code = run_child(ctx, result, command, min(result.budget, ctx.left()))
        result.summary = {"rows": _load_rows(rows), "table": _table_lines(ctx.out / result.log)}
        _finish(result, code)

    return section


def _load_rows(path: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads(path.read_text()))
    except (OSError, ValueError):
        return []


def _table_lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [
        line
        for line in path.read_text(errors="replace").splitlines()
        if line.startswith(("|", "note:", "date:", "versions:", "machine:", "latency:"))
        or line.endswith("adapter: ")
        or " adapter: " in line
    ]


def cuda_probe_section(ctx: Context, result: Result) -> None:
    available, reason = availability(ctx, "cuda")
    if not available:
        result.status, result.reason = "skipped", f"cuda is unavailable here: {reason}"
        return
    launches = "50" if ctx.rehearse else "400"
    code = run_child(
        ctx,
        result,
        [ctx.python, "bench/gpu_check.py", "probe-cuda", "--launches", launches],
        min(result.budget, ctx.left()),
    )
    result.summary = _json_line(ctx.out / result.log) or {}
    _finish(result, code, ok=bool(result.summary))


def llm_decode_section(ctx: Context, result: Result) -> None:
    """SmolLM2-135M decode tokens/s on each available GPU backend against transformers. A
    rehearsal decodes on the CPU backend instead: on software devices loading the model alone
    outlasts its budget."""
    names = ["cpu"] if ctx.rehearse else available_gpus(ctx)
    if not names:
        result.status, result.reason = "skipped", "no GPU backend is available here"
        return
    probe = [
        ctx.python,
        "-c",
        "from spawnml_models.assets import asset_file as a; from spawnml_models.llm.pipeline import"
        " MODEL_ASSET, MODEL_FILE; print(a(MODEL_ASSET, MODEL_FILE))",
    ]
    found = subprocess.run(probe, cwd=ROOT, capture_output=True, text=True, timeout=60)
    if found.returncode != 0:
        result.status = "skipped"
        result.reason = (
            "the SmolLM2-135M Q4_1 GGUF (94 MiB) is not in the model cache: it does not fit the 64 MiB a"
            " device call carries"
        )
        return
    tokens = "4" if ctx.rehearse else "64"
    command = [
        ctx.python,
        "bench/gpu_check.py",
        "llm-decode",
        "--tokens",
        tokens,
        "--backends",
        ",".join(names),
        "--path",
        found.stdout.strip(),
    ]
    code = run_child(ctx, result, command, min(result.budget, ctx.left()))
    result.summary = _json_line(ctx.out / result.log) or {}
    _finish(result, code, ok=bool(result.summary))


SECTIONS = [
    Section("environment", 20, 60, environment),
    Section("cuda-probe", 20, 20, cuda_probe_section),
    Section("conformance-cpu", 45, 60, conformance("cpu")),
    Section("conformance-cuda", 70, 60, conformance("cuda")),
    Section(
        "tests-cuda",
        40,
        20,
        tests_section(
            [
                "spawnml-cuda/tests",
                "tests/test_cuda_graphs.py",
                "tests/test_cuda_cublas.py",
                "tests/test_cuda_runtime.py",
                "spawnml-core/tests/test_kernel_render.py",
                "tests/test_kernel_ops.py",
                "tests/test_gpu_storage.py",
                "tests/test_device_faults.py",
                "tests/test_gpu_operators.py",
            ],
            cuda_keyword,
        ),
    ),
    Section("real-models", 30, 120, tests_section(["tests/test_gpu_real_models.py"], gpu_keyword)),
    Section("bench-cuda", 70, 20, bench("cuda")),
    Section("llm-decode", 30, 30, llm_decode_section),
    Section("conformance-webgpu", 45, 60, conformance("webgpu")),
    Section("conformance-opencl", 45, 60, conformance("opencl")),
    Section("bench-webgpu", 20, 90, bench("webgpu")),
    Section("bench-opencl", 20, 90, bench("opencl")),
]


# ----------------------------------------------------------------------------- reports


def write_reports(out: Path, meta: dict[str, Any], results: list[Result]) -> None:
    """``gpu-check.json`` and ``gpu-check.md``, rewritten whole (through a temporary file)."""
    document = {**meta, "sections": [asdict(result) for result in results]}
    _replace(out / "gpu-check.json", json.dumps(document, indent=1) + "\n")
    _replace(out / "gpu-check.md", markdown(document))


def _replace(path: Path, text: str) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(text)
    temporary.replace(path)


def markdown(document: dict[str, Any]) -> str:
    """The report as Markdown: the run, one table row a section, then each section's details."""
    mode = (
        "rehearsal (software devices, small budgets, a sample of the cases)"
        if document.get("rehearse")
        else "device run"
    )
    lines = [
        f"# gpu-check: {mode}",
        "",
        f"Started {document.get('started', '?')}, {document.get('state', '?')}"
        f" ({document.get('elapsed', 0):.0f} s of a {document.get('budget', 0):.0f} s budget).",
        "",
        "| section | status | seconds | budget | summary |",
        "|---|---|---:|---:|---|",
    ]
    for section in document["sections"]:
        lines.append(
            f"| {section['name']} | {section['status']} | {section['seconds']:.0f} |"
            f" {section['budget']:.0f} | {_one_line(section)} |"
        )
    for section in document["sections"]:
        details = _details(section)
        if details:
            lines += ["", f"## {section['name']}", "", *details]
    return "\n".join(lines) + "\n"


def _one_line(section: dict[str, Any]) -> str:
    summary = section.get("summary") or {}
    parts = [section["reason"]] if section.get("reason") else []
    for name, state in (summary.get("backends") or {}).items():
        if name in GPU_BACKENDS:
            parts.append(f"{name}: {state.get('device') if state.get('available') else 'unavailable'}")
    for key, value in summary.items():
        if key.endswith("_tok_s"):
            name = key.removesuffix("_decode_tok_s")
            parts.append(f"{name} {value} tok/s" if isinstance(value, float | int) else f"{name} {value}")
    for row in summary.get("rows") or []:
        ms = row["ms"]
        parts.append(
            f"{row['model']}: {ms[row['backend']]:.2f} ms, {ms[row['reference']]:.2f} ms {row['reference']}"
        )
        graph = row.get("graph")
        if graph and not graph["refused"]:
            parts.append(
                f"as a graph {ms[row['backend'] + ' graphs']:.2f} ms, host {row['host_ms']:.2f} -> "
                f"{graph['host_ms']:.2f} ms a run"
            )
        elif graph:
            parts.append("not captured: " + "; ".join(graph["refused"].values()))
    if summary.get("graph_capture") is True:
        parts.append(
            f"eager {summary['eager_host_us_per_launch']} µs a launch on the host; a graph replays"
            f" {summary['launches']} launches in {summary['graph_host_us_per_replay']} µs"
        )
    counts = summary.get("counts")
    if counts:
        parts.append(", ".join(f"{count} {outcome}" for outcome, count in sorted(counts.items())))
    if "share_of_cpu" in summary:
        parts.append(
            f"{summary['passed_of_cpu']} of the CPU's {summary['cpu_passed']} ({summary['share_of_cpu']:.1%})"
        )
        if "meets_97_percent" in summary:
            parts.append(
                "meets the 97% bar" if summary["meets_97_percent"] else "below the 97% bar or failing"
            )
    return "; ".join(parts).replace("|", "/")


def _details(section: dict[str, Any]) -> list[str]:
    summary = section.get("summary") or {}
    name = section["name"]
    lines: list[str] = []
    if name == "environment" and summary:
        lines.append(
            f"- date: {summary.get('date')}; machine: {summary.get('machine')};"
            f" python {summary.get('python', '?')}"
        )
        lines.append(f"- nvidia-smi: {summary.get('nvidia_smi')}")
        lines.append("- versions: " + ", ".join(f"{k} {v}" for k, v in summary.get("versions", {}).items()))
        for backend, state in summary.get("backends", {}).items():
            text = state.get("device") if state.get("available") else f"unavailable: {state.get('reason')}"
            lines.append(f"- `{backend}`: {text}")
    elif name.startswith("conformance-"):
        if summary.get("failed_cases"):
            lines.append("Failed: " + ", ".join(summary["failed_cases"]))
        refusals = summary.get("refusals", {})
        if refusals:
            lines += ["| refused at load, or skipped, because | cases |", "|---|---:|"]
            lines += [
                f"| {reason.replace('|', '/')} | {len(cases)} |"
                for reason, cases in list(refusals.items())[:40]
            ]
            if len(refusals) > 40:
                lines.append(f"| ({len(refusals) - 40} more reasons: see the JSON report) | |")
    elif name.startswith("bench-"):
        lines += summary.get("table", [])
    elif name in ("cuda-probe", "llm-decode") and summary:
        lines += [f"- {key}: {value}" for key, value in summary.items() if key != "cublas_direct"]
        products = summary.get("cublas_direct")
        if isinstance(products, list):
            lines += [
                "",
                "| product | direct cuBLAS host µs | cupy.matmul host µs | max abs diff"
                " | graph replay equal |",
                "|---|---:|---:|---:|---|",
                *(
                    f"| {r['shape']} | {r['direct_host_us']} | {r['cupy_matmul_host_us']} | "
                    f"{r['max_abs_diff']:.1e} | {r['graph_replay_equals']} |"
                    for r in products
                ),
            ]
        elif products is not None:
            lines.append(f"- cublas_direct: {products}")
    elif summary.get("failed"):
        lines.append("Failed: " + ", ".join(summary["failed"]))
    if section.get("status") in ("failed", "timeout") and section.get("log_tail"):
        lines += ["```", section["log_tail"], "```"]
    return lines


# ----------------------------------------------------------------------------- the run


def run(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    ctx = Context(out, args.python, args.rehearse, start + args.budget, args.workers)
    sections = [s for s in SECTIONS if not args.only or s.name in args.only]
    results = [Result(s.name, s.rehearse_budget if args.rehearse else s.budget) for s in sections]
    meta: dict[str, Any] = {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "rehearse": args.rehearse,
        "budget": args.budget,
        "state": "running",
        "elapsed": 0.0,
    }
    write_reports(out, meta, results)
    try:
        run_sections(ctx, sections, results, meta, start)
    except BaseException:
        meta["state"] = "stopped from outside"
        write_reports(out, meta, results)
        raise
    meta["state"] = "finished"
    write_reports(out, meta, results)
    return 1 if any(r.status in ("failed", "timeout") for r in results) else 0


def run_sections(
    ctx: Context, sections: list[Section], results: list[Result], meta: dict[str, Any], start: float
) -> None:
    out = ctx.out
    for section, result in zip(sections, results, strict=True):
        if ctx.left() < 5:
            result.status, result.reason = "skipped", "no time left in the run's budget"
        else:
            began = time.monotonic()
            result.budget = min(result.budget, ctx.left())
            print(f"== {section.name} (deadline {result.budget:.0f} s)", flush=True)
            try:
                section.run(ctx, result)
            except Exception as error:  # a broken section must not stop the others
                result.status, result.reason = "failed", f"{type(error).__name__}: {error}"
            result.seconds = round(time.monotonic() - began, 1)
            if result.status in ("failed", "timeout") and result.log:
                result.log_tail = tail(out / result.log)
            print(
                f"== {section.name}: {result.status} in {result.seconds:.0f} s: {_one_line(asdict(result))}",
                flush=True,
            )
        meta["elapsed"] = round(time.monotonic() - start, 1)
        write_reports(out, meta, results)


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["probe-cuda"]:
        from gpu_probe import main as probe

        return probe(argv[1:])
    if argv[:1] == ["render"]:  # the Markdown report again from a JSON report
        for name in argv[1:]:
            path = Path(name)
            path.with_suffix(".md").write_text(markdown(json.loads(path.read_text())))
        return 0
    if argv[:1] == ["llm-decode"]:
        from gpu_probe import llm_decode

        return llm_decode(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", default="gpu-check-report", help="the report folder (default: gpu-check-report)"
    )
    parser.add_argument(
        "--rehearse",
        action="store_true",
        help="small budgets and a sample of the cases, for software devices",
    )
    parser.add_argument(
        "--budget", type=float, default=None, help="seconds for the whole run (default: 450; 300 rehearsing)"
    )
    parser.add_argument("--only", nargs="*", default=[], help="run these sections alone")
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter the sections run (default: this one)"
    )
    parser.add_argument(
        "--workers", type=int, default=min(12, os.cpu_count() or 1), help="pytest-xdist workers"
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)  # so that a section's process group is killed too
    if args.budget is None:
        args.budget = 300.0 if args.rehearse else 450.0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
