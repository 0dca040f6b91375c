"""The CUDA runtime's calls into cupy while it captures and replays graphs, over a stand-in for cupy
that moves bytes in host memory and records each call: the order a capture, a host write during
it, a read that ends a segment and a replay make them in, as the CUDA runtime API requires (no
wait on the capturing stream; host data written on another stream, after the stream is idle)."""

from __future__ import annotations

import ctypes
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest


class Memory:
    """A device buffer of the stand-in: host bytes."""

    def __init__(self, calls: list[str], size: int) -> None:
        self.calls, self.bytes = calls, np.zeros(size, np.uint8)
        self.ptr = self.bytes.ctypes.data

    def copy_from_host_async(self, source: int, nbytes: int, stream: Stream) -> None:
        self.calls.append(f"host to device on {stream.name}")
        ctypes.memmove(self.ptr, source, nbytes)

    def copy_to_host_async(self, target: int, nbytes: int, stream: Stream) -> None:
        self.calls.append(f"device to host on {stream.name}")
        ctypes.memmove(target, self.ptr, nbytes)

    def copy_from_device_async(self, source: Memory, nbytes: int, stream: Stream) -> None:
        self.calls.append(f"device to device on {stream.name}")
        self.bytes[:nbytes] = source.bytes[:nbytes]


class Stream:
    def __init__(self, calls: list[str], name: str) -> None:
        self.calls, self.name, self.ptr, self.capturing = calls, name, id(self), False

    def synchronize(self) -> None:
        assert not self.capturing, "a capturing stream cannot be waited for"
        self.calls.append(f"wait for {self.name}")

    def begin_capture(self) -> None:
        self.capturing = True
        self.calls.append(f"begin capture on {self.name}")

    def end_capture(self) -> Any:
        self.capturing = False
        self.calls.append(f"end capture on {self.name}")
        calls = self.calls

        class Graph:
            def upload(self, stream: Stream) -> None:
                calls.append("upload graph")

            def launch(self, stream: Stream) -> None:
                calls.append(f"launch graph on {stream.name}")

        return Graph()


def over_stand_in(monkeypatch) -> types.ModuleType:
    """spawnml_cuda.runtime loaded afresh over the cupy in sys.modules, under a name of its own
    (so that the real module, where a process has it, stays as it is)."""
    import spawnml_cuda

    name = "spawnml_cuda.runtime_over_stand_in"
    spec = importlib.util.spec_from_file_location(name, Path(spawnml_cuda.__file__).with_name("runtime.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def runtime(monkeypatch) -> Any:
    calls: list[str] = []
    names = iter(["stream", "side stream"])

    class Device:
        def __init__(self, number: int) -> None:
            self.id, self.mem_info = number, (0, 1 << 30)

        def use(self) -> None:
            pass

    cuda = types.SimpleNamespace(
        Device=Device,
        Stream=lambda non_blocking: Stream(calls, next(names)),
        alloc=lambda size: Memory(calls, size),
        runtime=types.SimpleNamespace(
            getDeviceProperties=lambda device: {"name": b"Stand-in", "major": 9, "minor": 0},
            CUDARuntimeError=RuntimeError,
        ),
        memory=types.SimpleNamespace(OutOfMemoryError=MemoryError),
        device=types.SimpleNamespace(get_cublas_handle=lambda: 1),
    )
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda, float32=np.float32))
    module = over_stand_in(monkeypatch)
    with pytest.warns(RuntimeWarning, match="cuBLAS is not called directly .*cupy loaded no libcublas"):
        made = module.CUDARuntime({})
    made.calls = calls
    calls.clear()
    return made


def test_a_capture_with_a_host_write_and_a_read_calls_cupy_in_order(runtime):
    calls = runtime.calls
    data, _ = runtime.alloc(64)
    runtime.copy_in(data, np.arange(16, dtype=np.float32))
    runtime.begin_capture()
    constant, _ = runtime.alloc(16)
    runtime.copy_in(constant, np.full(4, 0.5, np.float32))  # written at once, beside the capture
    assert np.frombuffer(runtime.copy_out(data, 16), np.float32).tolist() == [0, 1, 2, 3]  # a segment ends
    graph = runtime.end_capture()
    assert calls == [
        "host to device on stream",
        "wait for stream",  # the stream idle before anything is written beside it
        "begin capture on stream",
        "host to device on side stream",
        "wait for side stream",
        "end capture on stream",
        "upload graph",
        "launch graph on stream",
        "device to host on stream",
        "wait for stream",
        "wait for stream",
        "begin capture on stream",
        "end capture on stream",
        "upload graph",
    ]
    assert np.frombuffer(constant.bytes[:16], np.float32).tolist() == [0.5] * 4
    calls.clear()
    assert runtime.replay(graph)
    assert calls == [
        "launch graph on stream",
        "device to host on stream",
        "wait for stream",
        "launch graph on stream",
    ]
    data.bytes[4:8] = 0  # the value read changes: the replay stops after the first segment
    calls.clear()
    assert not runtime.replay(graph)
    assert calls == ["launch graph on stream", "device to host on stream", "wait for stream"]


def test_a_capture_the_driver_invalidated_ends_and_frees_the_runtime(runtime):
    runtime.begin_capture()
    runtime.stream.end_capture = lambda: (_ for _ in ()).throw(RuntimeError("capture invalidated"))
    with pytest.raises(RuntimeError, match="capture invalidated"):
        runtime.end_capture()
    assert runtime.capture is None and runtime.lock.acquire(blocking=False)
    runtime.lock.release()
