"""Every file of the hostile corpus is refused with its error, having done little work, touching nothing
outside its folder.

Work is bounded by memory, not timed: tracemalloc's peak while the file loads stays under
:data:`ALLOCATED`. An audit hook records, while a hostile file loads, every file opened and every attempt to
start a process; nothing may be opened in the ``outside`` folder beside the model's, and no
process may start.
"""

from __future__ import annotations

import os
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import spawnml

from .corpus import Hostile, corpus

#: A bound on a refusal's work: refusing allocates little (18 MiB at most, first-use imports
#: included; a few KiB otherwise), while reading what a hostile header claims would allocate
#: at least the 64 MiB that the smallest bomb of the corpus inflates to.
ALLOCATED = 32 << 20
PROCESS_EVENTS = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "subprocess.Popen")

_recording: list[tuple[str, tuple]] | None = None


def _audit(event: str, args: tuple) -> None:
    if _recording is not None and (event == "open" or event.startswith(PROCESS_EVENTS)):
        _recording.append((event, args))


sys.addaudithook(_audit)


@pytest.fixture
def audited() -> Iterator[list[tuple[str, tuple]]]:
    global _recording
    _recording = []
    try:
        yield _recording
    finally:
        _recording = None


ENTRY_POINTS: dict[str, Callable[[Path], object]] = {
    "load": spawnml.load,
    "session": spawnml.InferenceSession,
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("hostile", corpus(), ids=lambda hostile: hostile.name)
def test_refused(hostile: Hostile, entry: str, tmp_path: Path, audited: list) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    path = hostile.build(folder)
    audited.clear()
    tracemalloc.start()
    try:
        with pytest.raises(hostile.refused_with) as refused:
            ENTRY_POINTS[entry](path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < ALLOCATED, f"{hostile.name} allocated {peak / 2**20:.0f} MiB before it was refused"
    assert str(refused.value), "the error says nothing"
    outside = str(tmp_path / "outside")
    opened = [str(args[0]) for event, args in audited if event == "open" and isinstance(args[0], str | Path)]
    assert not [name for name in opened if os.path.realpath(name).startswith(outside)]
    assert not [event for event, _ in audited if event != "open"], "a process was started"
    assert not (tmp_path / "outside" / "pwned").exists()
