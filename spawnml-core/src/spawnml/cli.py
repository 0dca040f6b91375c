"""The ``spawnml`` command line."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """A subcommand a plugin adds to ``spawnml``: ``spawnml NAME ...``."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int | None]


def main(argv: list[str] | None = None) -> int:
    raise SystemExit("spawnml: the command line is not built yet")
