"""Graph capture and replay (spawnml_cuda.graphs) on a runtime in host memory that records what it is
asked to do and, like CUDA's stream capture, runs nothing while it captures: what a replay runs is
exactly what the capture recorded, on the buffers it recorded. Results are checked against numpy."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from spawnml.backend import Availability
from spawnml.errors import InvalidArgumentError
from spawnml.gpu import GPUBackend, Runtime
from spawnml.gpu.array import DeviceArray
from spawnml.kernel.render import CUDARenderer
from spawnml_cuda.graphs import CapturingRuntime, GraphRunner

#: A kernel of the recording runtime: numpy over the bound buffers' float32 views.
Program = Callable[..., None]


class RecordingRuntime(CapturingRuntime):
    """Host buffers; a log of every call; launches recorded instead of run while capturing."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []
        self.recording: list[tuple[Program, Sequence[Any]]] | None = None

    def describe(self) -> str:
        return "recording device"

    @property
    def max_groups(self) -> int:
        return 65535

    @property
    def max_buffer_bytes(self) -> int:
        return 1 << 30

    def _alloc(self, size: int) -> np.ndarray:
        return np.full(size, 0xFF, np.uint8)  # garbage (NaN as float32) until written

    def compile(self, source: str, name: str) -> Any:
        raise NotImplementedError  # launches here name numpy functions, not sources

    def upload(self, handle: np.ndarray, data: np.ndarray) -> None:
        self.log.append("upload")
        handle[: data.nbytes] = data.view(np.uint8).reshape(-1)

    def download(self, handle: np.ndarray, nbytes: int) -> bytes:
        self.log.append("download")
        return handle[:nbytes].tobytes()

    def enqueue(self, program: Program, buffers: Sequence[Any], grid: Any, scalars: Any) -> None:
        if self.recording is not None:
            self.recording.append((program, buffers))
        else:
            self.log.append(f"launch {program.__name__}")
            program(*(b.view(np.float32) for b in buffers))

    def start_capture(self) -> None:
        self.log.append("begin capture")
        self.recording = []

    def finish_capture(self) -> Any:
        self.log.append("end capture")
        graph, self.recording = tuple(self.recording or ()), None
        return graph

    def discard_capture(self) -> None:
        self.log.append("abort capture")
        self.recording = None

    def launch_graph(self, native: Any) -> None:
        self.log.append(f"graph of {len(native)}")
        for program, buffers in native:
            program(*(b.view(np.float32) for b in buffers))

    def copy_device(self, source: np.ndarray, target: np.ndarray, nbytes: int) -> None:
        assert self.recording is None, "the runner copies outside captures"
        self.log.append("copy")
        target[:nbytes] = source[:nbytes]

    def upload_now(self, handle: np.ndarray, data: np.ndarray) -> None:
        self.log.append("upload now")
        handle[: data.nbytes] = data.view(np.uint8).reshape(-1)


class RecordingBackend(GPUBackend):
    name = "recording"
    renderer = CUDARenderer()

    def availability(self) -> Availability:
        return Availability(True, "host memory")

    def device_name(self) -> str:
        return "recording device"

    def make_runtime(self) -> Runtime:
        return RecordingRuntime()


def twice(x: np.ndarray, y: np.ndarray) -> None:
    y[: x.size] = 2 * x


def relu_plus_one(x: np.ndarray, y: np.ndarray) -> None:
    y[: x.size] = np.maximum(x, 0) + 1


def plan(backend: GPUBackend, read_on_host: bool = False, write_used: bool = False) -> Any:
    """A two-kernel "plan": ``relu(2 x) + 1`` through an intermediate it drops; optionally reading the
    intermediate on the host (as a data-dependent shape does) or writing host data into it."""

    def body(inputs: list[DeviceArray]) -> list[DeviceArray]:
        (x,) = inputs
        runtime = backend.runtime
        doubled = backend.empty(x.shape, x.dtype)
        runtime.launch(twice, [x.handle, doubled.handle], (1, 1, 1), [])
        if read_on_host:
            backend.to_numpy(doubled)
        if write_used:
            runtime.copy_in(doubled.handle, np.ones(x.size, np.float32))
        y = backend.empty(x.shape, x.dtype)
        runtime.launch(relu_plus_one, [doubled.handle, y.handle], (1, 1, 1), [])
        return [y]

    return body


def expected(x: np.ndarray) -> np.ndarray:
    return np.maximum(2 * x, 0) + 1


@pytest.fixture
def backend() -> RecordingBackend:
    return RecordingBackend()


def run(runner: GraphRunner, body: Any, x: np.ndarray) -> np.ndarray:
    backend = runner.backend
    (y,) = runner.run(body, [backend.from_numpy(x)])
    return backend.to_numpy(y)


def test_first_run_captures_and_later_runs_replay_one_graph(backend):
    runtime = backend.runtime
    runner = GraphRunner(backend, warmup=0)
    body = plan(backend)
    rng = np.random.default_rng(0)
    for index in range(3):
        x = rng.standard_normal((4, 5)).astype(np.float32)
        runtime.log.clear()
        np.testing.assert_array_equal(run(runner, body, x), expected(x))
        captured = ["copy", "begin capture", "end capture"] if index == 0 else []
        # the input copied into the graph's, one graph of two kernels, the output copied out
        assert runtime.log == ["upload", *captured, "copy", "graph of 2", "copy", "download"]
    assert (runner.report.captures, runner.report.replays, runner.report.eager) == (1, 2, 0)


def test_warm_up_runs_eagerly_before_the_capture(backend):
    runtime = backend.runtime
    runner = GraphRunner(backend, warmup=2)
    body = plan(backend)
    x = np.arange(-3, 3, dtype=np.float32)
    logs = []
    for _ in range(3):
        runtime.log.clear()
        np.testing.assert_array_equal(run(runner, body, x), expected(x))
        logs.append(list(runtime.log))
    eager = ["upload", "launch twice", "launch relu_plus_one", "download"]
    assert logs[:2] == [eager, eager]
    assert "begin capture" in logs[2] and "graph of 2" in logs[2]
    assert (runner.report.eager, runner.report.captures) == (2, 1)


def test_a_new_shape_is_captured_again_and_the_old_one_still_replays(backend):
    runner = GraphRunner(backend, warmup=0)
    body = plan(backend)
    small, large = np.linspace(-1, 1, 6, dtype=np.float32), np.linspace(-2, 3, 40, dtype=np.float32)
    for x in (small, large, small, large.reshape(5, 8), large):
        np.testing.assert_array_equal(run(runner, body, x), expected(x))
    assert (runner.report.captures, runner.report.replays) == (3, 2)  # (6,), (40,), (5, 8)


def test_host_data_into_a_buffer_the_graph_uses_runs_eagerly_and_is_reported(backend):
    runtime = backend.runtime
    runner = GraphRunner(backend, warmup=0)
    body = plan(backend, write_used=True)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    for _ in range(2):  # the intermediate overwritten with ones: relu(1) + 1
        np.testing.assert_array_equal(run(runner, body, x), np.full(8, 2, np.float32))
    assert runtime.log.count("begin capture") == runtime.log.count("abort capture") == 1  # tried once
    assert runner.report.captures == 0 and runner.report.eager == 2
    ((signature, why),) = runner.report.refused.items()
    assert signature == "(float32[8])" and "host data are written into a buffer the graph already uses" in why
    assert runtime.capture is None and runtime.lock.acquire(blocking=False)  # the runtime is free again
    runtime.lock.release()


def test_a_read_on_the_host_splits_the_graph_and_is_read_again_on_each_replay(backend):
    """The intermediate read on the host (as a shape computed on the device is): the first kernel
    runs at capture so that the value can be read, and each replay reads it again; a value that
    differs (a shape that depends on the data) makes that run eager, and the signature with it."""
    runtime = backend.runtime
    runner = GraphRunner(backend, warmup=0)
    body = plan(backend, read_on_host=True)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    logs = []
    for _ in range(2):
        runtime.log.clear()
        np.testing.assert_array_equal(run(runner, body, x), expected(x))
        logs.append(list(runtime.log))
    # at capture: the first segment runs for its read; each replay: both segments, the read between
    assert logs[0][:6] == ["upload", "copy", "begin capture", "end capture", "graph of 1", "download"]
    assert logs[1] == ["upload", "copy", "graph of 1", "download", "graph of 1", "copy", "download"]
    assert (runner.report.captures, runner.report.replays, runner.report.refused) == (1, 1, {})
    for y in (-x, -x):  # another value read: eager, and not replayed again
        np.testing.assert_array_equal(run(runner, body, y), expected(y))
    ((_, reason),) = runner.report.refused.items()
    assert "a value read on the host differs from the capture's" in reason
    assert (runner.report.replays, runner.report.eager, runner.graphs) == (1, 2, {})


def plus_first(x: np.ndarray, c: np.ndarray, y: np.ndarray) -> None:
    y[: x.size] = x + c[0]


def test_host_data_made_during_the_run_is_written_at_capture_and_kept(backend):
    """A constant the run uploads (as a shape computed on the host is) is written once, at capture,
    and stays for every replay, though the run drops it and allocates its size again after."""
    runtime = backend.runtime

    def body(inputs: list[DeviceArray]) -> list[DeviceArray]:
        (x,) = inputs
        half = backend.from_numpy(np.full(4, 0.5, np.float32))
        shifted = backend.empty(x.shape, x.dtype)
        runtime.launch(plus_first, [x.handle, half.handle, shifted.handle], (1, 1, 1), [])
        del half
        scratch = backend.empty((4,), np.dtype(np.float32))  # the dropped constant's size
        runtime.launch(twice, [shifted.handle, scratch.handle], (1, 1, 1), [])
        return [shifted]

    runner = GraphRunner(backend, warmup=0)
    rng = np.random.default_rng(6)
    for index in range(3):
        x = rng.standard_normal(4).astype(np.float32)
        runtime.log.clear()
        np.testing.assert_array_equal(run(runner, body, x), x + np.float32(0.5))
        assert runtime.log.count("upload now") == (1 if index == 0 else 0)
    assert (runner.report.captures, runner.report.replays, runner.report.refused) == (1, 2, {})


def test_an_error_in_the_captured_run_ends_the_capture_and_is_raised(backend):
    runtime = backend.runtime
    runner = GraphRunner(backend, warmup=0)

    def failing(inputs: list[DeviceArray]) -> list[DeviceArray]:
        raise InvalidArgumentError("bad attribute")

    with pytest.raises(InvalidArgumentError, match="bad attribute"):
        runner.run(failing, [backend.from_numpy(np.zeros(2, np.float32))])
    assert runtime.log[-1] == "abort capture" and runtime.capture is None
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(run(runner, plan(backend), x), expected(x))


def test_a_capture_the_library_refuses_runs_eagerly_and_is_reported(backend, monkeypatch):
    runtime = backend.runtime

    def invalidated() -> Any:
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(runtime, "finish_capture", invalidated)
    runner = GraphRunner(backend, warmup=0)
    x = np.linspace(-2, 2, 5, dtype=np.float32)
    np.testing.assert_array_equal(run(runner, plan(backend), x), expected(x))
    ((_, reason),) = runner.report.refused.items()
    assert (
        reason
        == "cannot be captured as a graph: RuntimeError: operation not permitted when stream is capturing"
    )
    assert runtime.capture is None and runner.report.eager == 1


def test_the_graphs_buffers_are_never_handed_to_other_work(backend):
    runtime = backend.runtime
    before = runtime.memory().live
    runner = GraphRunner(backend, warmup=0)
    body = plan(backend)
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    run(runner, body, x)
    (captured,) = runner.graphs.values()
    used = [buffer for native, _ in captured.graph.segments for _, buffers in native for buffer in buffers]
    assert all(runtime.pinned(x.handle) for x in (*captured.inputs, *captured.outputs))
    # Other work allocates and fills buffers of the same size while the graph lives ...
    others = [backend.from_numpy(np.full(64, 7.0, np.float32)) for _ in range(8)]
    assert not {id(h) for h in used} & {id(o.handle) for o in others}
    del others  # ... and gives them back, pooled for reuse
    x = -x
    np.testing.assert_array_equal(run(runner, body, x), expected(x))
    del runner, captured, used
    gc.collect()
    assert runtime.memory().live == before  # the graph's buffers go with it


def test_other_threads_wait_for_the_capture(backend):
    runtime = backend.runtime
    runner = GraphRunner(backend, warmup=0)
    started, launched, threads = threading.Event(), [], []
    other = backend.from_numpy(np.ones(4, np.float32))
    out = backend.empty((4,), np.dtype(np.float32))

    def elsewhere() -> None:
        started.set()
        runtime.launch(twice, [other.handle, out.handle], (1, 1, 1), [])
        launched.append(runtime.capture is None)

    def body(inputs: list[DeviceArray]) -> list[DeviceArray]:
        threads.append(thread := threading.Thread(target=elsewhere))
        thread.start()
        started.wait()
        thread.join(0.2)  # blocked: the capture holds the runtime
        assert not launched
        return plan(backend)(inputs)

    x = np.ones(4, np.float32)
    (y,) = runner.run(body, [backend.from_numpy(x)])
    threads[0].join()
    assert launched == [True]  # ran after the capture, not recorded into it
    np.testing.assert_array_equal(backend.to_numpy(out), 2 * np.ones(4))
    np.testing.assert_array_equal(backend.to_numpy(y), expected(x))


def test_a_runtime_without_graphs_is_refused():
    from spawnml import plugins

    cpu_like = plugins.backends().get("webgpu") or plugins.backends().get("opencl")
    if cpu_like is None or not cpu_like.availability().available:
        pytest.skip("no GPU backend without graphs here")
    runner = GraphRunner(cpu_like, warmup=0)
    with pytest.raises(InvalidArgumentError, match="does not capture graphs"):
        runner.run(lambda inputs: inputs, [cpu_like.from_numpy(np.ones(2, np.float32))])


# A real plan: a GraphSession over OpenCL (PoCL here) whose runtime captures as CUDA does, by
# recording the launches it is given and launching them again on each replay.
class OpenCLRecordingGraphs:
    """Made on first use, so that this module imports without pyopencl."""

    @staticmethod
    def backend() -> GPUBackend:
        from spawnml_opencl.backend import OpenCLBackend
        from spawnml_opencl.runtime import OpenCLRuntime, pick

        class Runtime(CapturingRuntime, OpenCLRuntime):
            recording: list[tuple[Any, ...]] | None = None

            def enqueue(self, program: Any, buffers: Sequence[Any], grid: Any, scalars: Any) -> None:
                if self.recording is None:
                    OpenCLRuntime.launch(self, program, buffers, grid, scalars)
                else:
                    self.recording.append((program, buffers, grid, scalars))

            def upload(self, handle: Any, data: np.ndarray) -> None:
                OpenCLRuntime.copy_in(self, handle, data)

            def download(self, handle: Any, nbytes: int) -> bytes:
                return OpenCLRuntime.copy_out(self, handle, nbytes)

            def start_capture(self) -> None:
                self.recording = []

            def finish_capture(self) -> Any:
                graph, self.recording = tuple(self.recording or ()), None
                return graph

            def discard_capture(self) -> None:
                self.recording = None

            def launch_graph(self, native: Any) -> None:
                for launch in native:
                    OpenCLRuntime.launch(self, *launch)

            def upload_now(self, handle: Any, data: np.ndarray) -> None:
                OpenCLRuntime.copy_in(self, handle, data)  # queued before any replay of the graph

            def copy_device(self, source: Any, target: Any, nbytes: int) -> None:
                OpenCLRuntime.copy_in(
                    self, target, np.frombuffer(OpenCLRuntime.copy_out(self, source, nbytes), np.uint8)
                )

        class Backend(OpenCLBackend):
            name = "opencl-graphs"

            def make_runtime(self) -> Runtime:
                device, reason = pick(None)
                if device is None:
                    pytest.skip(f"opencl: {reason}")
                return Runtime(device)

        return Backend()


@pytest.fixture
def graphs_backend(monkeypatch) -> GPUBackend:
    from spawnml import plugins

    from tests.backends import backend_or_skip

    backend_or_skip("opencl")
    backend = OpenCLRecordingGraphs.backend()
    monkeypatch.setitem(plugins.backends(), backend.name, backend)
    return backend


def small_model(op_last: str = "Softmax"):
    """``last(relu(x @ w + b))`` with float32 weights, and onnxruntime's session of it."""
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    attributes: dict[str, Any] = {"axis": -1} if op_last == "Softmax" else {}
    last = helper.make_node(op_last, ["r"], ["y"], **attributes)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Add", ["m", "b"], ["a"]),
            helper.make_node("Relu", ["a"], ["r"]),
            last,
        ],
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
        [
            helper.make_tensor_value_info(
                "y", TensorProto.FLOAT if op_last == "Softmax" else TensorProto.INT64, None
            )
        ],
        [w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = model.SerializeToString()
    return data, onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])


def test_a_plan_replays_as_onnxruntime_runs_it(graphs_backend):
    import spawnml
    from spawnml_cuda.graph_session import GraphSession

    data, reference = small_model()
    session = GraphSession(spawnml.InferenceSession(data, providers=[graphs_backend.name]))
    rng = np.random.default_rng(1)
    for rows in (3, 3, 3, 5, 3):
        x = rng.standard_normal((rows, 16)).astype(np.float32)
        (got,) = session.run(None, {"x": x})
        np.testing.assert_allclose(got, reference.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
    report = session.report  # 3 rows: warm-up, capture, replay, replay; 5 rows: warm-up
    assert (report.eager, report.captures, report.replays, report.refused) == (2, 1, 2, {})


def test_a_shape_that_depends_on_the_data_replays_until_the_data_changes_it(graphs_backend):
    import spawnml
    from spawnml_cuda.graph_session import GraphSession

    data, reference = small_model("NonZero")
    session = GraphSession(spawnml.InferenceSession(data, providers=[graphs_backend.name]))
    rng = np.random.default_rng(2)
    first, second = (rng.standard_normal((4, 16)).astype(np.float32) for _ in range(2))
    for x in (first, first, first, second, second):  # warm-up, capture, replay, diverged, eager
        (got,) = session.run(None, {"x": x})
        np.testing.assert_array_equal(got, reference.run(None, {"x": x})[0])
    report = session.report
    assert (report.captures, report.replays, report.eager) == (1, 1, 3)
    ((signature, reason),) = report.refused.items()
    assert "float32[4, 16]" in signature and "a value read on the host differs" in reason


def test_the_benchmark_reports_host_time_before_and_after(graphs_backend, tmp_path):
    """bench/gpu.py's graph column, on the recording runtime: the same session eagerly and replayed."""
    from tests.test_gpu_check import load

    gpu = load("gpu")
    data, _ = small_model()
    path = tmp_path / "small.onnx"
    path.write_bytes(data)
    feeds = {"x": np.random.default_rng(3).standard_normal((6, 16)).astype(np.float32)}
    measured = gpu.bench("small", gpu.Case(str(path), feeds), graphs_backend.name, runs=2)
    graph = measured["graph"]
    # warm-up: an eager run, then the capture; then one replay a timed run
    assert (graph["captures"], graph["replays"], graph["refused"]) == (1, 2, {})
    assert graph["max_abs_diff"] < 1e-6 and graph["host_ms"] > 0 and measured["host_ms"] > 0
    row = gpu.row(measured)
    assert row.count("|") == 15 and f"{graph['host_ms']:.2f}" in row
