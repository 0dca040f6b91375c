"""The ``spawnml`` command line: built-in commands plus those plugins register."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from . import dtypes
from .cli_inputs import read_input
from .cli_model import configure_convert, configure_info, model_report, run_convert, run_info
from .cli_profile import configure_profile, run_profile
from .errors import SpawnMLError
from .plugins.hookspecs import Command

__all__ = ["Command", "main", "model_report", "operators_report", "plugins_report"]


NO_BACKEND_HINT = (
    "No backend is installed. Install one, e.g. `pip install spawnml-cpu` "
    "(numpy, runs everywhere), then run `spawnml plugins` again."
)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``spawnml`` command."""
    try:
        parser = _parser()
        args = parser.parse_args(argv)
        if not hasattr(args, "handler"):
            parser.print_help()
            return 2
        return args.handler(args) or 0
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (keeps interpreter shutdown quiet)
        return 0
    except SpawnMLError as error:
        print(f"spawnml: error: {error}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    from .conformance.command import configure_conformance, run_conformance
    from .plugins import registry

    parser = argparse.ArgumentParser(prog="spawnml", description="Run neural networks from any model file.")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    builtins = [
        Command("plugins", "list installed plugins: backends, formats, models", _configure_json, _plugins),
        Command("models", "list installed model ports and pipelines", _configure_json, _models),
        Command("operators", "list known operators and which backends run them", _configure_json, _operators),
        Command(
            "info",
            "describe a model: format, inputs, outputs, operators or weights",
            configure_info,
            run_info,
        ),
        Command("convert", "write a model as ONNX, optionally optimized", configure_convert, run_convert),
        Command("run", "run a model on .npy inputs", _configure_run, _run),
        Command("profile", "time a model's runs by operator type and node", configure_profile, run_profile),
        Command("conformance", "check a backend's conformance", configure_conformance, run_conformance),
    ]
    for command in [*builtins, *registry().commands.values()]:
        sub = commands.add_parser(command.name, help=command.help, description=command.help)
        command.configure(sub)
        sub.set_defaults(handler=command.run)
    return parser


# -- plugins / models -------------------------------------------------------------------


def _configure_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def plugins_report() -> dict[str, Any]:
    """What ``spawnml plugins --json`` prints."""
    from .plugins import registry

    loaded = registry()
    backends = []
    for name, backend in loaded.backends.items():
        status = backend.availability()
        backends.append(
            {
                "name": name,
                "available": status.available,
                "reason": status.reason,
                "device": backend.device_name() if status.available else None,
                "native_operators": len(backend.kernels.ops()),
            }
        )
    return {
        "backends": backends,
        "formats": [
            {"name": name, "extensions": list(loader.extensions)} for name, loader in loaded.formats.items()
        ],
        "models": [{"name": spec.name, "task": spec.task} for spec in loaded.models.values()],
        "operators": len(loaded.operators),
        "plugins": [
            {
                "name": info.name,
                "distribution": info.distribution,
                "version": info.version,
                "builtin": info.builtin,
                "provides": info.provides,
            }
            for info in loaded.plugins.values()
        ],
    }


def _plugins(args: argparse.Namespace) -> int:
    report = plugins_report()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print("Backends:")
    if not report["backends"]:
        print("  " + NO_BACKEND_HINT)
    for backend in report["backends"]:
        state = (
            f"available  {backend['device']}" if backend["available"] else f"unavailable: {backend['reason']}"
        )
        print(f"  {backend['name']:<10} {state}  ({backend['native_operators']} native operators)")
    print("Formats:")
    for loader in report["formats"] or [
        {"name": "none installed (pip install spawnml-formats)", "extensions": []}
    ]:
        print(f"  {loader['name']:<10} {' '.join(loader['extensions'])}")
    print("Models:")
    for model in report["models"] or [{"name": "none installed (pip install spawnml-models)", "task": ""}]:
        print(f"  {model['name']:<20} {model['task']}")
    print(f"Operators known: {report['operators']}")
    print("Plugins:")
    for info in report["plugins"]:
        provides = "; ".join(f"{kind}: {len(items)}" for kind, items in info["provides"].items()) or "nothing"
        print(f"  {info['name']:<20} {info['distribution']} {info['version']}  ({provides})")
    return 0


def _models(args: argparse.Namespace) -> int:
    from .plugins import models

    specs = models()
    if args.json:
        rows = [
            {"name": s.name, "task": s.task, "description": s.description, "source": s.source}
            for s in specs.values()
        ]
        print(json.dumps(rows, indent=2))
        return 0
    if not specs:
        print("No model plugins installed (pip install spawnml-models).")
    for spec in specs.values():
        print(f"{spec.name:<24} {spec.task:<22} {spec.description}")
    return 0


def operators_report() -> list[dict[str, Any]]:
    """What ``spawnml operators --json`` prints: every operator, its versions, its backends."""
    from .plugins import registry

    loaded = registry()
    native = {name: backend.kernels.ops() for name, backend in loaded.backends.items()}
    return [
        {
            "domain": domain or "ai.onnx",
            "op_type": op_type,
            "versions": [schema.since_version for schema in loaded.operators.versions(domain, op_type)],
            "backends": sorted(name for name, ops in native.items() if (domain, op_type) in ops),
        }
        for domain, op_type in loaded.operators.operators()
    ]


def _operators(args: argparse.Namespace) -> int:
    rows = operators_report()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        versions = ",".join(map(str, row["versions"]))
        backends = " ".join(row["backends"]) or "(no backend)"
        print(f"{row['domain'] + '::' + row['op_type']:<36} {versions:<16} {backends}")
    print(f"{len(rows)} operators")
    return 0


# -- run ----------------------------------------------------------------------------------


def _configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="path of the model file")
    parser.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="an input as a .npy file (repeat for each input)",
    )
    parser.add_argument(
        "--providers", default="cpu", help="comma-separated provider priority list (default: cpu)"
    )
    parser.add_argument("--output", "-o", type=Path, help="write the outputs to this .npz file")


def _run(args: argparse.Namespace) -> int:
    from .session import InferenceSession

    feeds = dict(read_input(spec) for spec in args.input)
    session = InferenceSession(args.model, providers=args.providers.split(","))
    names = [value.name for value in session.get_outputs()]
    results = session.run(None, feeds)
    if args.output:
        outputs: dict[str, Any] = dict(zip(names, results, strict=True))  # sequences and None too
        np.savez(args.output, **outputs)
        print(f"wrote {len(results)} output(s) to {args.output}", file=sys.stderr)
    for name, value in zip(names, results, strict=True):
        if value is None:
            print(f"{name}: empty optional")
            continue
        for index, array in enumerate(value if isinstance(value, list) else [value]):
            label = f"{name}[{index}]" if isinstance(value, list) else name
            print(f"{label}: {dtypes.name(array.dtype)} {list(array.shape)}")
            print(np.array2string(array, threshold=20, edgeitems=3, precision=6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
