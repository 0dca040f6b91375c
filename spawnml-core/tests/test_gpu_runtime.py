"""The shared runtime machinery without a device: size-pooled allocation and the program cache."""

from __future__ import annotations

import numpy as np
import pytest
from spawnml.errors import InvalidArgumentError
from spawnml.gpu import DeviceArray, Runtime, Storage, physical
from spawnml.gpu.runtime import MemoryStats


class FakeRuntime(Runtime):
    def __init__(self) -> None:
        super().__init__()
        self.allocated: list[int] = []
        self.compiled: list[str] = []

    def describe(self) -> str:
        return "fake"

    max_groups = 65535
    max_buffer_bytes = 1 << 20

    def _alloc(self, size: int) -> bytearray:
        self.allocated.append(size)
        return bytearray(size)

    def copy_in(self, handle, data):
        handle[: data.nbytes] = data.tobytes()

    def copy_out(self, handle, nbytes):
        return bytes(handle[:nbytes])

    def compile(self, source: str, name: str) -> str:
        self.compiled.append(source)
        return name

    def launch(self, program, buffers, grid, scalars):
        raise AssertionError("not launched here")


def test_buffers_are_pooled_by_aligned_size():
    runtime = FakeRuntime()
    first = Storage(runtime, 10)
    handle = first.handle
    del first  # back to the pool
    again = Storage(runtime, 13)  # the same 16-byte bucket
    assert again.handle is handle and runtime.allocated == [16]
    Storage(runtime, 17)
    assert runtime.allocated == [16, 32]


def test_programs_compile_once_per_source():
    runtime = FakeRuntime()
    assert runtime.program("src", "k") == runtime.program("src", "k") == "k"
    runtime.program("other", "k")
    assert runtime.compiled == ["src", "other"]


def test_views_share_storage_and_keep_host_values():
    runtime = FakeRuntime()
    host = np.arange(6, dtype=np.int64)
    array = DeviceArray(Storage(runtime, 24), (6,), host.dtype, host)
    view = array.view((2, 3))
    assert view.storage is array.storage and view.host.shape == (2, 3)
    with pytest.raises(InvalidArgumentError, match="cannot view 6 elements"):
        array.view((4,))


def test_physical_types():
    assert physical(np.dtype(np.int64)).name == "i32" and physical(np.dtype(np.bool_)).name == "i32"
    assert physical(np.dtype(np.uint64)).name == "u32" and physical(np.dtype(np.float64)).name == "f64"
    with pytest.raises(InvalidArgumentError, match="not complex64"):
        physical(np.dtype(np.complex64))


def test_pool_is_bounded_releasing_the_longest_unused_first():
    runtime = FakeRuntime()
    runtime.pool_bytes = 64
    sizes = [16, 32, 48, 16]
    storages = [Storage(runtime, size) for size in sizes]
    handles = [storage.handle for storage in storages]
    while storages:  # freed in order: 16, 32, 48, 16 bytes; keeping 112 would pass 64
        del storages[0]
    assert runtime.memory() == MemoryStats(live=0, pooled=64, buffers=2)
    assert Storage(runtime, 48).handle is handles[2] and Storage(runtime, 16).handle is handles[3]
    assert runtime.allocated == sizes  # nothing new was allocated for them


def test_a_discarded_buffer_is_released_not_pooled():
    runtime = FakeRuntime()
    storage = Storage(runtime, 100)
    storage.reuse = False
    del storage
    assert runtime.memory() == MemoryStats(live=0, pooled=0, buffers=0)


def test_a_request_takes_a_pooled_buffer_a_few_size_classes_up():
    runtime = FakeRuntime()
    big = Storage(runtime, 100_000)  # made at 106,496 bytes: 13 steps of 8 KiB
    handle = big.handle
    del big
    assert Storage(runtime, 90_000).handle is handle  # 90,112 bytes, two classes below
    assert runtime.allocated == [106_496]
