"""The shared GPU kernel table on OpenCL against numpy, op by op, and MiniLM against onnxruntime.

The op-by-op cases are tests/test_webgpu.py's, run with this module's ``gpu`` fixture, so
both backends are held to the same tolerances: exact for data movement and comparisons,
1e-6 relative for single roundings, 1e-5 for reductions, matmuls and transcendental
functions. Skips with the availability reason where pyopencl finds no device (PoCL is enough).
"""

from __future__ import annotations

from importlib.metadata import entry_points

import numpy as np
import pytest
import spawnml
from spawnml import plugins
from spawnml.backend import KernelContext
from spawnml.ir import Node
from spawnml_opencl import OpenCLBackend, runtime

from tests.backends import backend_or_skip
from tests.test_webgpu import (  # noqa: F401  (collected here, against the opencl backend)
    test_binary_broadcasts_like_numpy,
    test_cast,
    test_expand,
    test_gather_embedding_lookup,
    test_large_launch_spreads_over_a_2d_grid,
    test_layer_normalization,
    test_matmul,
    test_minilm_on_the_gpu_and_cpu_matches_onnxruntime,
    test_movement,
    test_pow_and_integer_ops,
    test_reductions,
    test_refuses_precisely_and_splits_with_cpu,
    test_softmax,
    test_unary,
    test_views_share_the_buffer,
    test_where_broadcasts,
)


@pytest.fixture(scope="module")
def gpu():
    return backend_or_skip("opencl")


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
    compiled, held = len(gpu.runtime._programs), gpu.runtime.memory()
    neg(gpu, x)
    assert len(gpu.runtime._programs) == compiled
    assert gpu.runtime.memory().buffers == held.buffers  # the same buffers, taken from the pool again


def test_tensor_above_the_device_allocation_limit_is_refused(gpu):
    elements = gpu.runtime.max_buffer_bytes // 4 + 1
    with pytest.raises(
        spawnml.errors.DeviceMemoryError, match=r"past the [0-9,]+ bytes one opencl buffer may hold"
    ):
        gpu.empty((elements,), np.dtype(np.float32))


def test_a_kernel_past_the_device_workgroup_limit_fails_with_its_reason(gpu, monkeypatch):
    """The reason compile gives reaches the user, inside the ExecutionError that names the node."""
    from onnx import TensorProto, helper

    info = runtime.cl.kernel_work_group_info

    class Kernel:
        def get_work_group_info(self, param, device):
            return (1024, 1, 1) if param == info.COMPILE_WORK_GROUP_SIZE else 256

    class Program:  # as pyopencl's, but every kernel asks for more than the device allows
        def __init__(self, context, source):
            pass

        def build(self, devices):
            return type("Built", (), {"__getattr__": lambda self, name: Kernel()})()

    monkeypatch.setattr(runtime.cl, "Program", Program)
    with pytest.raises(RuntimeError, match=r"kernel k needs workgroups of \[1024, 1, 1\], above the 256 "):
        gpu.runtime.compile("source", "k")

    monkeypatch.setattr(gpu.runtime, "_programs", {})  # compile again, not from the caches
    monkeypatch.setattr(gpu.device(), "programs", {})
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["y"], name="negate")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    session = spawnml.InferenceSession(model, providers=["opencl"])
    failed = r"'negate' \(Neg\) failed on provider 'opencl'"
    with pytest.raises(spawnml.errors.ExecutionError, match=failed) as e:
        session.run(None, {"x": np.ones(4, np.float32)})
    assert "needs workgroups of [1024, 1, 1], above the 256" in str(e.value)
