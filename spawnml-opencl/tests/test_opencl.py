"""The shared GPU kernel table on OpenCL against numpy, op by op, and MiniLM against onnxruntime.

The op-by-op cases are tests/test_webgpu.py's, run with this module's ``gpu`` fixture, so
both backends are held to the same tolerances: exact for data movement and comparisons,
1e-6 relative for single roundings, 1e-5 for reductions, matmuls and transcendental
functions. Skips with the availability reason where pyopencl finds no device (PoCL is enough).
"""

from __future__ import annotations

import collections
from importlib.metadata import entry_points

import numpy as np
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper
from spawnml import plugins
from spawnml.backend import KernelContext
from spawnml.ir import Node
from spawnml_models.assets import asset_file
from spawnml_opencl import OpenCLBackend, runtime

from tests.model_files import require
from tests.test_webgpu import (  # noqa: F401  (collected here, against the opencl backend)
    test_binary_broadcasts_like_numpy,
    test_cast,
    test_expand,
    test_gather_embedding_lookup,
    test_large_launch_spreads_over_a_2d_grid,
    test_layer_normalization,
    test_matmul,
    test_movement,
    test_pow_and_integer_ops,
    test_reductions,
    test_softmax,
    test_unary,
    test_views_share_the_buffer,
    test_where_broadcasts,
)


@pytest.fixture(scope="module")
def gpu():
    backend = plugins.backends()["opencl"]
    status = backend.availability()
    if not status.available:
        pytest.skip(f"opencl: {status.reason}")
    return backend


def test_entry_point_registers_the_backend():
    names = [ep.name for ep in entry_points(group="spawnml") if ep.dist and ep.dist.name == "spawnml-opencl"]
    assert names == ["opencl"]
    assert isinstance(plugins.backends()["opencl"], OpenCLBackend)


def test_device_is_chosen_by_index_or_name(monkeypatch):
    found = runtime.devices()
    if not found:
        pytest.skip("pyopencl found no OpenCL device")
    name = runtime.describe(found[-1])
    assert runtime.pick(str(len(found) - 1)) == (found[-1], name)
    assert runtime.pick(found[-1].name[:6].upper())[0] is not None
    device, reason = runtime.pick("no such device")
    assert device is None and "SPAWNML_OPENCL_DEVICE='no such device'" in reason and name in reason
    monkeypatch.setenv("SPAWNML_OPENCL_DEVICE", str(len(found)))
    status = OpenCLBackend().availability()
    assert not status.available and "matches none" in status.reason


def neg(gpu, x):
    ctx = KernelContext(Node("Neg", [], []), 17, {}, gpu)
    return gpu.to_numpy(gpu.kernels.find("", "Neg", 17).fn(ctx, gpu.from_numpy(x)))


def test_device_name_names_platform_and_device(gpu):
    device = gpu.runtime.device
    assert device.platform.name.strip() in gpu.device_name() and device.name.strip() in gpu.device_name()


def test_buffers_are_pooled_and_programs_cached(gpu):
    x = np.arange(1000, dtype=np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(neg(gpu, x), -x)
    compiled, pooled = len(gpu.runtime._programs), sum(len(v) for v in gpu.runtime._pool.values())
    neg(gpu, x)
    assert len(gpu.runtime._programs) == compiled
    assert sum(len(v) for v in gpu.runtime._pool.values()) == pooled


def test_tensor_above_the_device_allocation_limit_is_refused(gpu):
    elements = gpu.runtime.max_buffer_bytes // 4 + 1
    with pytest.raises(spawnml.errors.InvalidArgumentError, match="opencl kernel may bind"):
        gpu.empty((elements,), np.dtype(np.float32))


def test_refuses_precisely_and_splits_with_cpu(gpu):
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["r"]), helper.make_node("IsNaN", ["r"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.BOOL, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    with pytest.raises(spawnml.UnsupportedOperatorError, match=r"IsNaN.*opencl: no opencl kernel"):
        spawnml.InferenceSession(model, providers=["opencl"])
    session = spawnml.InferenceSession(model, providers=["opencl", "cpu"])
    assert [p for _, _, p in session.placement()] == ["opencl", "cpu"]
    assert [(t.value, t.source, t.target) for t in session.transfers()] == [("r", "opencl", "cpu")]
    x = np.array([-1, np.nan, 2], np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], np.isnan(-x))


@pytest.mark.real_model
def test_minilm_on_opencl_and_cpu_matches_onnxruntime(gpu):
    """Sentence embeddings within 1e-4 (relative and absolute) of onnxruntime's."""
    path = require(lambda: asset_file("minilm-onnx-int8", "model.onnx"))
    session = spawnml.InferenceSession(path, providers=["opencl", "cpu"])
    placed = collections.Counter(provider for _, _, provider in session.placement())
    on_cpu = sorted({op for _, op, provider in session.placement() if provider == "cpu"})
    print(f"MiniLM: {dict(placed)} nodes; on cpu: {on_cpu}; {len(session.transfers())} transfers")
    assert placed["opencl"] > 5 * placed["cpu"]
    assert not [op for op in on_cpu if gpu.kernels.find("", op, 17)], "an op the GPU table runs went to cpu"
    reference = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ids = np.random.default_rng(7).integers(0, 30000, (2, 11))
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    feeds["attention_mask"][1, 8:] = 0
    got, want = session.run(None, feeds)[0], reference.run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
