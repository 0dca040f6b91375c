"""``spawnml wasi run GUEST.wasm``: run a WebAssembly program with SpawnML as its wasi-nn host."""

from __future__ import annotations

import argparse

from spawnml.cli import Command
from spawnml.errors import InvalidArgumentError


def _named_model(text: str) -> tuple[str, str]:
    name, separator, path = text.partition("=")
    if not separator or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE, got {text!r}")
    return name, path


def _directory(text: str) -> tuple[str, str]:
    """``HOST_DIR[::GUEST_DIR]`` as Wasmtime's CLI spells a preopened directory."""
    host, _, guest = text.partition("::")
    return host, guest or host


def _add_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``spawnml wasi run``, taken before the guest's file or after it."""
    parser.add_argument(
        "--dir",
        dest="dirs",
        action="append",
        default=[],
        type=_directory,
        metavar="HOST_DIR[::GUEST_DIR]",
        help="preopen a host directory for the guest, under GUEST_DIR (default: the same path); repeatable",
    )
    parser.add_argument(
        "--model",
        dest="models",
        action="append",
        default=[],
        type=_named_model,
        metavar="NAME=FILE",
        help="preload a model the guest opens with load_by_name(NAME); repeatable",
    )
    parser.add_argument(
        "--providers",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        default=["cpu"],
        help="providers the guest's graphs may run on, comma-separated (default: cpu); "
        "the guest's `gpu` target takes the GPU ones among them",
    )


def configure_wasi(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spawnml wasi``."""
    actions = parser.add_subparsers(dest="action", required=True)
    run = actions.add_parser(
        "run",
        help="run a wasm32-wasi program; its wasi-nn calls run on SpawnML",
        usage="spawnml wasi run GUEST.wasm [options] [-- ARGS ...]",
    )
    run.add_argument("guest", help="the WebAssembly program (.wasm, or .wat text)")
    _add_options(run)
    run.add_argument("rest", nargs=argparse.REMAINDER, help="more options, then -- and the guest's arguments")


def run_wasi(args: argparse.Namespace) -> int:
    """Run the guest to its end; its exit code is the command's."""
    from .host import WasiNnHost
    from .runner import run_guest

    options, guest_args = _split(args.rest)
    later = argparse.ArgumentParser(prog="spawnml wasi run", exit_on_error=False)
    _add_options(later)
    try:
        args, unknown = later.parse_known_args(options, namespace=args)
    except argparse.ArgumentError as error:
        raise InvalidArgumentError(str(error)) from None
    if unknown:
        raise InvalidArgumentError(f"put the guest's arguments after `--`: {' '.join(unknown)!r}")
    host = WasiNnHost(providers=args.providers, named_models=dict(args.models))
    return run_guest(args.guest, host, guest_args, dirs=args.dirs)


def _split(rest: list[str]) -> tuple[list[str], list[str]]:
    """The options before ``--``, and the guest's arguments after it."""
    if "--" not in rest:
        return rest, []
    cut = rest.index("--")
    return rest[:cut], rest[cut + 1 :]


WASI = Command(
    name="wasi",
    help="host WebAssembly programs: their wasi-nn calls run on SpawnML",
    configure=configure_wasi,
    run=run_wasi,
)
