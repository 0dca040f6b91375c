"""A deflate bomb is refused from its directory, before any of it is unpacked."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
import spawnml

from .torch_files import bomb_streamed

#: Memory a refusal may allocate beyond the archive itself: far below the bomb's 1 GiB.
READ_BOUND = 8 << 20


def test_deflate_bomb_refused_unread(tmp_path: Path) -> None:
    data = bomb_streamed(1 << 30)
    assert len(data) < 2 << 20
    path = tmp_path / "model.pt"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        with pytest.raises(spawnml.ModelLoadError, match="zip bomb"):
            spawnml.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(data) + READ_BOUND, f"refusing the bomb allocated {peak:,} bytes"
