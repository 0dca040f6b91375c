"""The library kernels, rendered and run for real on WebGPU (wgpu) and OpenCL, against numpy.

Skipped with the reason when wgpu finds no adapter (Mesa's lavapipe is enough) or
pyopencl finds no platform (Debian's PoCL is enough).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from spawnml.kernel import Buffer, Kernel, ReadBuffer, atomic_add, f32, global_id, kernel, u32
from spawnml.kernel.library import add, matmul, sum_partial
from spawnml.kernel.render import OpenCLRenderer, WGSLRenderer, scalar_layout

Runner = Callable[[Kernel, Sequence[np.ndarray], Sequence[float | int], tuple[int, ...]], list[np.ndarray]]


def run_wgpu(
    k: Kernel, arrays: Sequence[np.ndarray], scalars: Sequence[float | int], groups: tuple[int, ...]
):
    """Dispatch ``groups`` workgroups of ``k`` and read every buffer back."""
    wgpu = pytest.importorskip("wgpu", reason="wgpu is not installed")
    adapter = wgpu.gpu.request_adapter_sync()
    if adapter is None:
        pytest.skip("wgpu found no adapter (install Mesa's lavapipe: mesa-vulkan-drivers)")
    device = adapter.request_device_sync()
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
    buffers = [device.create_buffer_with_data(data=np.ascontiguousarray(a), usage=usage) for a in arrays]
    if k.scalars:
        packed = b"".join(
            np.array(v, scalar_layout[p.type]).tobytes() for p, v in zip(k.scalars, scalars, strict=True)
        )
        uniform = packed + bytes(-len(packed) % 16)
        buffers.append(device.create_buffer_with_data(data=uniform, usage=wgpu.BufferUsage.UNIFORM))
    shader = device.create_shader_module(code=WGSLRenderer().render(k))
    pipeline = device.create_compute_pipeline(
        layout="auto", compute={"module": shader, "entry_point": k.name}
    )
    entries = [
        {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate(buffers)
    ]
    bind_group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries)
    encoder = device.create_command_encoder()
    compute = encoder.begin_compute_pass()
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, bind_group)
    compute.dispatch_workgroups(*groups)
    compute.end()
    device.queue.submit([encoder.finish()])
    return [
        np.frombuffer(device.queue.read_buffer(b), a.dtype).copy()
        for a, b in zip(arrays, buffers, strict=False)
    ]


def run_opencl(
    k: Kernel, arrays: Sequence[np.ndarray], scalars: Sequence[float | int], groups: tuple[int, ...]
):
    """Launch ``groups`` workgroups of ``k`` and read every buffer back."""
    cl = pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    try:
        ctx = cl.create_some_context(interactive=False)
    except cl.Error as e:
        pytest.skip(f"no OpenCL platform: {e}")
    queue = cl.CommandQueue(ctx)
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    buffers = [cl.Buffer(ctx, flags, hostbuf=np.ascontiguousarray(a)) for a in arrays]
    values = [np.array(v, p.type.numpy) for p, v in zip(k.scalars, scalars, strict=True)]
    program = getattr(cl.Program(ctx, OpenCLRenderer().render(k)).build(), k.name)
    local = k.workgroup[: len(groups)]
    program(queue, tuple(g * w for g, w in zip(groups, local, strict=True)), local, *buffers, *values)
    out = [np.empty_like(a) for a in arrays]
    for host, device in zip(out, buffers, strict=True):
        cl.enqueue_copy(queue, host, device)
    queue.finish()
    return out


RUNNERS = pytest.mark.parametrize("run", [run_wgpu, run_opencl], ids=["wgpu", "opencl"])


@RUNNERS
def test_add(run: Runner):
    rng = np.random.default_rng(0)
    n = 1000
    a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    *_, out = run(add.specialize(T=f32), [a, b, np.zeros(n, np.float32)], [n], (math.ceil(n / 64),))
    np.testing.assert_array_equal(out, a + b)  # one correctly rounded f32 add: exact


@RUNNERS
def test_sum_reduction_through_workgroup_memory(run: Runner):
    block = 64
    x = np.random.default_rng(1).standard_normal(5000, np.float32)
    k = sum_partial.specialize(T=f32, BLOCK=block)
    values = x
    while values.size > 1:
        groups = math.ceil(values.size / block)
        _, values = run(k, [values, np.zeros(groups, np.float32)], [values.size], (groups,))
    np.testing.assert_allclose(values[0], x.astype(np.float64).sum(), rtol=1e-5, atol=1e-4)


@RUNNERS
def test_tiled_matmul(run: Runner):
    rng = np.random.default_rng(2)
    m, n, kk, tile = 37, 45, 29, 8  # not multiples of the tile: the edges are guarded
    a, b = rng.standard_normal((m, kk), np.float32), rng.standard_normal((kk, n), np.float32)
    groups = (math.ceil(n / tile), math.ceil(m / tile))
    k = matmul.specialize(T=f32, TILE=tile)
    *_, c = run(k, [a.ravel(), b.ravel(), np.zeros(m * n, np.float32)], [m, n, kk], groups)
    np.testing.assert_allclose(c.reshape(m, n), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5 * kk)


@kernel(workgroup=(64,))
def count_positive(x: ReadBuffer[f32], count: Buffer[u32], n: u32):
    i = global_id(0)
    if i < n and x[i] > 0.0:
        atomic_add(count, 0, 1)


@RUNNERS
def test_atomic_add(run: Runner):
    x = np.random.default_rng(3).standard_normal(777, np.float32)
    _, count = run(
        count_positive.specialize(), [x, np.zeros(1, np.uint32)], [x.size], (math.ceil(x.size / 64),)
    )
    assert count[0] == (x > 0).sum()
