"""Device faults on every GPU backend: allocations that fail, a lost device, and closing a session.

Failures are forced through the runtime's fault-injection hook (``Runtime.inject``, for tests
only); on WebGPU a lost device is a real one (``GPUDevice.destroy()``). Answers after a fault are
compared with onnxruntime (rtol 1e-5, atol 1e-5); freed device memory with the runtime's
counters and, on WebGPU, with wgpu's own count of live buffer bytes.
"""

from __future__ import annotations

import gc
import re
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper
from spawnml.errors import DeviceError, DeviceLostError, DeviceMemoryError
from spawnml.gpu import GPUBackend
from spawnml.gpu.runtime import Fault, Runtime
from spawnml_models.assets import asset_file
from spawnml_models.embeddings import MODEL_ASSET
from spawnml_models.synthetic import token_batch

from tests.backends import GPU_BACKENDS, backend_or_skip
from tests.fuzz.seeds import onnx_seed
from tests.model_files import require

#: Longest a failing run may take before it counts as hung.
HANG_SECONDS = 60


@pytest.fixture(params=GPU_BACKENDS)
def gpu(request: pytest.FixtureRequest) -> GPUBackend:
    return backend_or_skip(request.param)


def expand_model() -> bytes:
    """``y = Expand(x, shape)``: the output's size is whatever the feed asks for."""
    nodes = [helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")]
    graph = helper.make_graph(
        nodes,
        "expand",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def reference(model: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


def assert_answers(session: spawnml.InferenceSession, model: bytes, feeds: dict[str, np.ndarray]) -> None:
    for got, want in zip(session.run(None, feeds), reference(model, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def failure(session: spawnml.InferenceSession, feeds: dict[str, np.ndarray]) -> DeviceError:
    """The device error a run raises, within :data:`HANG_SECONDS`, its traceback dropped so the
    run's buffers are freed."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(session.run, None, feeds)
        error = future.exception(timeout=HANG_SECONDS)
    assert isinstance(error, DeviceError), f"expected a DeviceError, got {error!r}"
    return error.with_traceback(None)


def test_tensor_past_the_device_limit_is_named_and_the_next_run_answers(gpu: GPUBackend) -> None:
    model = expand_model()
    session = spawnml.InferenceSession(model, providers=[gpu.name])
    assert {provider for *_, provider in session.placement()} == {gpu.name}
    limit = gpu.runtime.max_alloc_bytes
    count = limit // 4 + 1
    x = np.array([1.5], np.float32)
    error = failure(session, {"x": x, "shape": np.array([count], np.int64)})
    assert isinstance(error, DeviceMemoryError)
    message = str(error)
    assert f"node 'expand' (Expand, making 'y') on '{gpu.name}'" in message
    assert f"float32 tensor of shape [{count}] ({count * 4:,} bytes)" in message
    assert f"past the {limit:,} bytes" in message
    assert_answers(session, model, {"x": x, "shape": np.array([7], np.int64)})


def test_a_weight_past_one_binding_is_taken_in_windows(gpu: GPUBackend, monkeypatch) -> None:
    """Gemm with ``transB`` reads a weight larger than one kernel may bind in windows of its rows,
    with no transposed copy of the whole weight. The binding limit is lowered to 64 KiB to show it on
    a small model; onnxruntime is the reference (``rtol=atol=1e-5``)."""
    runtime = gpu.runtime
    if type(runtime).window is Runtime.window:
        pytest.skip(f"{gpu.name} allocates no buffer past one binding, so it binds whole buffers only")
    limit = 64 * 1024
    monkeypatch.setattr(type(runtime), "max_buffer_bytes", property(lambda self: limit))
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((200, 300)).astype(np.float32)  # 240,000 bytes: four windows and a part
    node = helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1, alpha=0.5)
    graph = helper.make_graph(
        [node],
        "windows",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 300])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [
            helper.make_tensor(n, TensorProto.FLOAT, v.shape, v.ravel())
            for n, v in (("w", weight), ("c", weight[:, 0]))
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    session = spawnml.InferenceSession(model, providers=[gpu.name])
    programs = set(gpu.device().programs)
    assert_answers(session, model, {"x": rng.standard_normal((3, 300)).astype(np.float32)})
    split = [key for key in set(gpu.device().programs) - programs if isinstance(key, tuple)]
    assert not split, f"kernels bound the weight in parts, not as windows of its rows: {split}"


def test_out_of_memory_names_the_tensor_and_the_next_run_answers(gpu: GPUBackend) -> None:
    model = onnx_seed()
    session = spawnml.InferenceSession(model, providers=[gpu.name])
    feeds = {"x": np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)}
    session.run(None, feeds)
    runtime = gpu.runtime
    gc.collect()  # earlier tests' garbage must not come back during the failed run and be counted
    runtime.trim()
    live = runtime.memory().live
    runtime.inject(Fault.OUT_OF_MEMORY, after=1)  # the feed's upload succeeds, the first node's output fails
    try:
        error = failure(session, feeds)
    finally:
        runtime.inject(None)
    assert isinstance(error, DeviceMemoryError)
    pattern = (
        rf"node '[^']+' \(\w+, making '[^']+'\) on '{gpu.name}': a float32 tensor of shape \[5, \d+\] "
        r"\([\d,]+ bytes\) could not be allocated: [\d,]+ bytes could not be allocated on .+ "
        r"\(out of memory \(injected\)\); [\d,]+ bytes are in use in \d+ buffers, "
        r"and [\d,]+ pooled bytes were released first"
    )
    assert re.fullmatch(pattern, str(error)), str(error)
    del error
    gc.collect()
    assert runtime.memory().live == live  # the failed run's buffers all came back
    assert_answers(session, model, feeds)


def test_a_lost_device_is_reported_not_hung_on(gpu: GPUBackend) -> None:
    model = onnx_seed()
    feeds = {"x": np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)}
    session = spawnml.InferenceSession(model, providers=[gpu.name])
    session.run(None, feeds)
    lost = gpu.runtime
    lost.trim()
    lost.inject(Fault.DEVICE_LOST, after=2)  # lost in the middle of the run
    error = failure(session, feeds)
    assert isinstance(error, DeviceLostError)
    where = rf"node '[^']+' \(\w+, making '[^']+'\) on '{gpu.name}'"
    assert re.match(rf"{where}: the device .+ was lost", str(error)), str(error)
    assert lost.lost
    again = failure(session, feeds)  # the session's weights were on the lost device
    assert isinstance(again, DeviceLostError)
    fresh = spawnml.InferenceSession(model, providers=[gpu.name])  # opens the device anew
    assert gpu.runtime is not lost
    assert_answers(fresh, model, feeds)


@pytest.mark.real_model
def test_close_releases_the_sessions_device_memory(gpu: GPUBackend) -> None:
    model = require(partial(asset_file, MODEL_ASSET, "model.onnx"))
    runtime = gpu.runtime
    runtime.trim()
    before, wgpu_before = runtime.memory(), wgpu_buffer_bytes(gpu)
    feeds = token_batch(np.random.default_rng(2), [9, 5])
    with spawnml.InferenceSession(model, providers=[gpu.name, "cpu"]) as session:
        session.run(None, feeds)
        held = runtime.memory()
        assert held.live - before.live > 80 << 20  # MiniLM's weights: 90 MB of float32
    with pytest.raises(spawnml.InvalidArgumentError, match="the session is closed"):
        session.run(None, feeds)
    runtime.trim()
    after = runtime.memory()
    constants = len(gpu.device().constants)  # small shared constants (strides) stay cached
    assert after.live - before.live < 64 * constants + 4096
    assert after.buffers - before.buffers <= constants
    if wgpu_before is not None:  # wgpu's own count of the bytes in live buffers
        assert wgpu_buffer_bytes(gpu) - wgpu_before < 1 << 20


def wgpu_buffer_bytes(gpu: GPUBackend) -> int | None:
    if gpu.name != "webgpu":
        return None
    from wgpu import diagnostics

    gc.collect()
    return diagnostics.object_counts.get_dict()["Buffer"]["resource_mem"]
