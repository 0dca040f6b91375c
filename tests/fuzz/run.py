"""The long fuzz run: every target for its share of ``--minutes``, random seeds, crashes collected.

``python -m tests.fuzz.run --minutes 10`` (or ``scripts/fuzz``) prints executions and crashes
per target and exits non-zero when any input raised something other than a SpawnMLError. Each
crashing or hanging input is saved to ``--crashes`` (a fresh folder under /tmp by default), named
after its target and where it failed, and the folder is printed at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .cases import CASES
from .targets import EXECUTIONS

#: Examples per hypothesis run; runs repeat with fresh seeds until the target's time is up.
BATCH = 200


def failures(error: BaseException) -> Iterator[BaseException]:
    """``error``, or each failure inside it when hypothesis reports several at once."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from failures(inner)
    else:
        yield error


def fuzz(target: str, seconds: float, folder: Path) -> list[str]:
    """Fuzz ``target`` for about ``seconds``; the distinct crashes found, shrunk by hypothesis.

    Each crash's input is written to ``folder``.
    """
    run = settings(max_examples=BATCH, database=None, deadline=None, suppress_health_check=list(HealthCheck))(
        given(st.data())(CASES[target])
    )
    crashes: dict[str, str] = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            run()
        except Exception as found:  # every non-SpawnMLError is a finding to report, not to stop at
            for error in failures(found):
                where = traceback.extract_tb(error.__traceback__)[-1]
                place = f"{type(error).__name__} at {where.filename}:{where.lineno}"
                data = getattr(error, "fuzz_input", None)
                if data is not None:
                    name = f"{target}-{type(error).__name__}-{hashlib.sha256(data).hexdigest()[:12]}.bin"
                    (folder / name).write_bytes(data)
                    place += f" (input {folder / name})"
                crashes.setdefault(place, str(error)[:2000])
    return [f"{place}: {message.splitlines()[0] if message else ''}" for place, message in crashes.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="total time, shared by the targets")
    parser.add_argument("--target", action="append", choices=sorted(CASES), help="fuzz only these")
    parser.add_argument("--crashes", type=Path, help="where to save crashing inputs (default: under /tmp)")
    args = parser.parse_args()
    folder = args.crashes or Path(tempfile.mkdtemp(prefix="spawnml-fuzz-crashes-"))
    folder.mkdir(parents=True, exist_ok=True)
    targets = args.target or list(CASES)
    found = 0
    print(f"{'target':14} {'executions':>10} {'crashes':>7}")
    for target in targets:
        crashes = fuzz(target, args.minutes * 60 / len(targets), folder)
        found += len(crashes)
        print(f"{target:14} {EXECUTIONS[target]:>10,} {len(crashes):>7}", flush=True)
        for crash in crashes:
            print(f"    {crash}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory {peak:,.0f} MiB; {found} distinct crash(es)")
    print(f"crashing inputs in {folder}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
