"""A pickle's forged memo index is refused before CPython's unpickler sizes its memo by it."""

from __future__ import annotations

import tracemalloc

import pytest
import spawnml

from .torch_files import archive, legacy, memo_forged

#: Memory a refusal may allocate: far below the 32 GiB memo that index 2^31 asks for.
READ_BOUND = 8 << 20


@pytest.mark.parametrize("wrap", [archive, legacy], ids=["zip", "legacy"])
def test_forged_memo_index_refused_unallocated(wrap) -> None:
    data = wrap(memo_forged(2**31))
    tracemalloc.start()
    try:
        with pytest.raises(spawnml.ModelLoadError, match="memo entry 2,147,483,648"):
            spawnml.load(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < READ_BOUND, f"refusing the forged memo index allocated {peak:,} bytes"


@pytest.mark.parametrize("wrap", [archive, legacy], ids=["zip", "legacy"])
def test_sequential_memo_loads(wrap) -> None:
    graph = spawnml.load(wrap(memo_forged(0)))
    assert graph.initializers
