"""``spawnml conformance``: run the suite against one backend, print and write the report."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SpawnMLError
from .case import KINDS

if TYPE_CHECKING:
    from .suite import Result

#: How often (in cases) progress is reported within a kind.
PROGRESS_EVERY = 250


def configure_conformance(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spawnml conformance``."""
    parser.add_argument("--backend", required=True, metavar="NAME", help="the installed backend to check")
    parser.add_argument(
        "--kind",
        action="append",
        choices=KINDS,
        metavar="KIND",
        help=f"case kinds to run, repeatable (default: all of {', '.join(KINDS)})",
    )
    parser.add_argument("--match", metavar="REGEX", help="run only the cases whose name matches")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("conformance-report"),
        metavar="DIR",
        help="folder for the JSON and Markdown reports (default: ./conformance-report)",
    )
    parser.add_argument(
        "--fallback",
        metavar="NAME",
        help="a second provider for the nodes the backend refuses (e.g. cpu): checks mixed placement, "
        "under both backends' expected failures",
    )
    parser.add_argument(
        "--compare-onnxruntime",
        action="store_true",
        help="also run the cases on onnxruntime and count how many it passes",
    )


def run_conformance(args: argparse.Namespace) -> int:
    """Run the suite; exit status 0 when it passes, 1 when a case fails it."""
    missing = [name for name in ("onnx", "onnxruntime") if importlib.util.find_spec(name) is None]
    if missing:
        raise SpawnMLError(f"the conformance kit needs {missing}: pip install 'spawnml-core[conformance]'")
    from ..session import resolve_providers
    from .expectations import ExpectedFailures
    from .report import Report
    from .suite import check_expectations, lane, load_cases, run_suite

    backend, *fallback = resolve_providers([args.backend, *([args.fallback] if args.fallback else [])])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's warnings from kernels and case data; outcomes tell
        files = [ExpectedFailures.of_backend(each) for each in (backend, *fallback)]
        every = load_cases(args.kind or KINDS, args.match)
        for file in files:
            check_expectations(file, every, args.kind or KINDS, args.match)
        expected = files[0] if not fallback else files[0].with_fallback(files[1], fallback[0].name)
        cases = lane(backend, every, expected)
        print(f"{len(cases)} cases on backend {backend.name}", file=sys.stderr)
        results = run_suite(
            backend.name,
            cases,
            expected,
            args.compare_onnxruntime,
            Progress(len(cases)),
            fallback[0].name if fallback else None,
        )
    name = "+".join(b.name for b in (backend, *fallback))
    report = Report(name, backend.device_name(), results, args.compare_onnxruntime, versions(backend.name))
    print(report.to_text())
    for path in report.write(args.out):
        print(f"wrote {path}", file=sys.stderr)
    return 0 if report.ok else 1


class Progress:
    """Reports on stderr when a kind starts, and every few hundred cases."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.kind = ""
        self.start = time.perf_counter()

    def __call__(self, index: int, result: Result) -> None:
        kind = result.outcome.kind
        done = index + 1
        if kind != self.kind or done % PROGRESS_EVERY == 0 or done == self.total:
            self.kind = kind
            elapsed = time.perf_counter() - self.start
            print(f"  {done}/{self.total} cases ({kind}), {elapsed:.1f} s", file=sys.stderr)


def versions(backend: str) -> dict[str, str]:
    """Versions of what the results depend on: core, the backend's distribution, onnx, ..."""
    from ..plugins import registry

    owners = [
        info.distribution
        for info in registry().plugins.values()
        if backend in info.provides.get("backends", [])
    ]
    found = {}
    for name in dict.fromkeys(["spawnml-core", *owners, "onnx", "onnxruntime", "numpy"]):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found
