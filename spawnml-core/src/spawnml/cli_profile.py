"""The ``spawnml profile`` command: where a model's run time goes, by operator type and by node."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from . import dtypes
from .cli_inputs import read_input
from .errors import InvalidArgumentError
from .ir import TENSOR, Graph, Value
from .profiler import Summary, summarize

#: Integer feeds are drawn from [0, INT_HIGH): valid token ids, masks and segment ids alike.
INT_HIGH = 2


def configure_profile(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spawnml profile``."""
    from .passes.optimizer import LEVEL_NAMES

    parser.add_argument("model", help="path of the model file")
    parser.add_argument(
        "--providers", default="cpu", help="comma-separated provider priority list (default: cpu)"
    )
    parser.add_argument(
        "--optimization-level",
        choices=list(LEVEL_NAMES),
        default="all",
        help="graph optimizations of the session (default: all, as a session has them)",
    )
    parser.add_argument("--runs", type=int, default=10, help="profiled runs (default: 10)")
    parser.add_argument("--warmup", type=int, default=2, help="runs before profiling starts (default: 2)")
    parser.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="an input as a .npy file; inputs not given are random (seeded)",
    )
    parser.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="size of a named dynamic dimension of the random inputs (others are 1)",
    )
    parser.add_argument("--top", type=int, default=20, help="slowest nodes to list (default: 20)")
    parser.add_argument("--trace", type=Path, help="write the Chrome trace of the profiled runs here")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def random_feeds(graph: Graph, given: set[str], dims: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random arrays for the graph's inputs not in ``given``; dynamic dims from ``dims``, else 1."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in graph.inputs:
        if value.name in given or value.name in graph.initializers:
            continue
        shape = _concrete_shape(value, dims)
        dtype = value.dtype
        if dtype is None or value.kind != TENSOR:
            raise InvalidArgumentError(
                f"input {value.name!r} is not a tensor of known type: give it with -i {value.name}=FILE.npy"
            )
        if dtype == np.bool_:
            feeds[value.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            feeds[value.name] = rng.integers(0, INT_HIGH, shape).astype(dtype)
        elif np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.complexfloating):
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
        else:
            raise InvalidArgumentError(
                f"input {value.name!r} is {dtypes.type_string(dtype)}: give it with -i {value.name}=FILE.npy"
            )
    return feeds


def _concrete_shape(value: Value, dims: dict[str, int]) -> tuple[int, ...]:
    if value.shape is None:
        raise InvalidArgumentError(f"input {value.name!r} has no declared shape: give it with -i")
    return tuple(dim if isinstance(dim, int) else dims.get(dim or "", 1) for dim in value.shape)


def _parse_dims(specs: list[str]) -> dict[str, int]:
    dims = {}
    for spec in specs:
        name, sep, size = spec.partition("=")
        if not sep or not name or not size.isdigit():
            raise InvalidArgumentError(f"--dim takes NAME=VALUE with a whole number, got {spec!r}")
        dims[name] = int(size)
    return dims


def profile(
    model: str,
    providers: list[str],
    feeds: dict[str, np.ndarray],
    dims: dict[str, int],
    runs: int,
    warmup: int,
    level: str = "all",
) -> tuple[list[dict[str, Any]], float]:
    """The trace events of ``runs`` runs after ``warmup`` unprofiled ones, and session creation seconds."""
    from .session import InferenceSession, SessionOptions

    if runs < 1 or warmup < 0:
        raise InvalidArgumentError(
            f"--runs must be at least 1 and --warmup at least 0 (got {runs}, {warmup})"
        )
    start = time.perf_counter()
    session = InferenceSession(model, SessionOptions(graph_optimization_level=level), providers=providers)
    created = time.perf_counter() - start
    feeds = {**random_feeds(session.graph, set(feeds), dims), **feeds}
    for _ in range(warmup):
        session.run(None, feeds)
    with tempfile.TemporaryDirectory() as folder:
        session.start_profiling(os.path.join(folder, "spawnml_profile"))
        for _ in range(runs):
            session.run(None, feeds)
        path = session.end_profiling()
        events: list[dict[str, Any]] = json.loads(Path(path).read_text(encoding="utf-8"))
    session.close()
    return events, created


def run_profile(args: argparse.Namespace) -> int:
    """``spawnml profile``: tables (or JSON) of time by operator type and the slowest nodes."""
    feeds = dict(read_input(spec) for spec in args.input)
    providers, dims = args.providers.split(","), _parse_dims(args.dim)
    events, created = profile(
        args.model, providers, feeds, dims, args.runs, args.warmup, args.optimization_level
    )
    if args.trace:
        args.trace.write_text(json.dumps(events, separators=(",", ":")), encoding="utf-8")
    summary = summarize(events)
    if args.json:
        report = asdict(summary) | {"model": args.model, "providers": args.providers, "create_s": created}
        report["nodes"] = report["nodes"][: args.top]
        print(json.dumps(report, indent=2))
    else:
        print_summary(args.model, args.providers, created, summary, args.top)
    if args.trace:
        print(f"wrote the trace to {args.trace} (open it in ui.perfetto.dev)", file=sys.stderr)
    return 0


def print_summary(model: str, providers: str, created: float, summary: Summary, top: int) -> None:
    """The text report: runs, time by operator type, slowest nodes."""
    mean_run = sum(summary.run_us) / max(summary.runs, 1)
    print(f"Model: {model} on {providers}; session created in {created * 1e3:.1f} ms")
    print(
        f"Runs: {summary.runs}, mean {mean_run / 1e3:.3f} ms, fastest {min(summary.run_us) / 1e3:.3f} ms; "
        f"nodes take {summary.node_us / max(sum(summary.run_us), 1e-9):.0%} of run time"
    )
    print("By operator type:")
    print(f"  {'operator':<28} {'total ms':>10} {'share':>7} {'nodes':>6} {'calls':>7} {'µs/run':>10}")
    for row in summary.op_types:
        per_run = row.total_us / max(summary.runs, 1)
        print(
            f"  {row.op_type:<28} {row.total_us / 1e3:>10.3f} {row.share:>7.1%} "
            f"{row.nodes:>6} {row.calls:>7} {per_run:>10.1f}"
        )
    print(f"Slowest nodes (mean µs per run, top {min(top, len(summary.nodes))} of {len(summary.nodes)}):")
    for node in summary.nodes[:top]:
        print(f"  {node.mean_us:>10.1f}  {node.op_type:<24} {node.provider:<8} {node.name}")
