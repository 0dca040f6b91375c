"""The library kernels, rendered and run for real on WebGPU (wgpu) and OpenCL, against numpy.

Skipped with the reason when wgpu finds no adapter (Mesa's lavapipe is enough) or
pyopencl finds no platform (Debian's PoCL is enough).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from spawnml.kernel import Buffer, Kernel, KernelError, ReadBuffer, atomic_add, f32, global_id, kernel, u32
from spawnml.kernel.library import add, conv, matmul, norm, pad, pool, resize, sum_partial
from spawnml.kernel.render import OpenCLRenderer, WGSLRenderer, scalar_layout
from spawnml.kernel.split import split_buffers

Runner = Callable[[Kernel, Sequence[np.ndarray], Sequence[float | int], tuple[int, ...]], list[np.ndarray]]


def run_wgpu(
    k: Kernel, arrays: Sequence[np.ndarray], scalars: Sequence[float | int], groups: tuple[int, ...]
):
    """Dispatch ``groups`` workgroups of ``k`` and read every buffer back."""
    import wgpu

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
    import pyopencl as cl

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


def _ordered(k: Kernel, **scalars: float | int) -> list[float | int]:
    """The scalar arguments of ``k`` in parameter order."""
    return [scalars[p.name] for p in k.scalars]


def _conv_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, groups: int, stride: int, pad: int):
    """Grouped 2-D cross-correlation in float64 over numpy's sliding windows."""
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, w.shape[2:], axis=(2, 3))[
        :, :, ::stride, ::stride
    ]
    per_in, per_out = x.shape[1] // groups, w.shape[0] // groups
    parts = [
        np.einsum(
            "nchwij,mcij->nmhw", windows[:, g * per_in : (g + 1) * per_in], w[g * per_out : (g + 1) * per_out]
        )
        for g in range(groups)
    ]
    return np.concatenate(parts, axis=1) + b[None, :, None, None]


@RUNNERS
@pytest.mark.parametrize("tiled", [False, True], ids=["direct", "tiled"])
def test_convolution_kernels(run: Runner, tiled: bool):
    rng = np.random.default_rng(4)
    groups, stride, pad = 2, 2, 1
    x, w, b = (
        rng.standard_normal((2, 6, 9, 11), np.float32),
        rng.standard_normal((20, 3, 3, 3), np.float32),
        rng.standard_normal(20, np.float32),
    )
    want = _conv_reference(x, w, b, groups, stride, pad)
    window = {"KD": 1, "KH": 3, "KW": 3, "SD": 1, "SH": stride, "SW": stride, "DD": 1, "DH": 1, "DW": 1}
    sizes = {
        "C": 6,
        "M": 20,
        "G": groups,
        "D": 1,
        "H": 9,
        "W": 11,
        "OD": 1,
        "OH": 5,
        "OW": 6,
        "pd": 0,
        "ph": pad,
        "pw": pad,
    }
    y = np.zeros(want.size, np.float32)
    if tiled:
        k = conv.conv_gemm.specialize(T=f32, TILE=8, **window)
        groups_launched = (math.ceil(30 / 8), math.ceil(10 / 8), 2 * groups)
        *_, out = run(k, [x.ravel(), w.ravel(), b, y], _ordered(k, **sizes), groups_launched)
    else:
        k = conv.conv_direct.specialize(T=f32, **window)
        scalars = _ordered(k, n=y.size, width=y.size, **sizes)
        *_, out = run(k, [x.ravel(), w.ravel(), b, y], scalars, (math.ceil(y.size / 64),))
    np.testing.assert_allclose(out.reshape(want.shape), want, rtol=1e-5, atol=1e-5 * 27)


@RUNNERS
def test_resampling_and_padding_kernels(run: Runner):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 5), np.float32)
    index = rng.integers(0, 4, (2, 7)).astype(np.int32)
    weight = rng.random((2, 7)).astype(np.float32)
    k = resize.resample_axis.specialize(T=f32, TAPS=2)
    y = np.zeros(3 * 7 * 5, np.float32)
    scalars = _ordered(k, n=y.size, width=y.size, size=4, out=7, inner=5)
    *_, out = run(k, [x.ravel(), index.ravel(), weight.ravel(), y], scalars, (math.ceil(y.size / 64),))
    want = (x[:, index] * weight[None, :, :, None]).sum(axis=1)
    np.testing.assert_allclose(out.reshape(want.shape), want, rtol=1e-6, atol=1e-6)
    widths = [(1, 2), (3, 0), (2, 4)]
    for mode, code in (("reflect", pad.REFLECT), ("edge", pad.EDGE), ("wrap", pad.WRAP)):
        want = np.pad(x, widths, mode=mode)
        dims = np.array([*want.shape, *x.shape, *(b for b, _ in widths)], np.int32)
        k = pad.pad.specialize(T=f32, RANK=3, MODE=code)
        arrays = [x.ravel(), np.zeros(1, np.float32), np.zeros(want.size, np.float32), dims]
        _, _, out, _ = run(k, arrays, [want.size, want.size], (math.ceil(want.size / 64),))
        np.testing.assert_array_equal(out.reshape(want.shape), want, err_msg=mode)


@RUNNERS
def test_group_norm_and_global_pool_kernels(run: Runner):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 6, 50), np.float32) * 3 + 1
    scale, bias = rng.standard_normal(6, np.float32), rng.standard_normal(6, np.float32)
    k = norm.group_norm.specialize(T=f32, BLOCK=32)
    scalars = _ordered(k, rows=6, across=6, G=3, channels=2, inner=50, share=1, epsilon=1e-5)
    *_, out = run(k, [x.ravel(), scale, bias, np.zeros(x.size, np.float32)], scalars, (6,))
    grouped = x.astype(np.float64).reshape(2, 3, -1)
    standard = (grouped - grouped.mean(-1, keepdims=True)) / np.sqrt(grouped.var(-1, keepdims=True) + 1e-5)
    want = standard.reshape(x.shape) * scale[:, None] + bias[:, None]
    np.testing.assert_allclose(out.reshape(x.shape), want, rtol=1e-5, atol=1e-5)
    for average, reduce in ((True, np.mean), (False, np.max)):
        k = pool.global_pool.specialize(T=f32, BLOCK=32, AVERAGE=average)
        _, out = run(k, [x.ravel(), np.zeros(12, np.float32)], _ordered(k, rows=12, across=12, D=50), (12,))
        np.testing.assert_allclose(out, reduce(x.astype(np.float64), axis=-1).ravel(), rtol=1e-5, atol=1e-6)


@RUNNERS
def test_buffers_split_into_parts(run: Runner):
    """The tiled matmul with ``a`` bound as three windows and ``c`` as two (the last ones shorter)
    computes what the whole-buffer kernel does: every load and store reaches the part holding it."""
    rng = np.random.default_rng(4)
    m, n, kk, tile = 37, 45, 29, 8
    a, b = rng.standard_normal((m, kk), np.float32), rng.standard_normal((kk, n), np.float32)
    a_chunk, c_chunk = 400, 1000
    k = split_buffers(matmul.specialize(T=f32, TILE=tile), {"a": (3, a_chunk), "c": (2, c_chunk)})
    assert [p.name for p in k.buffers] == ["a__0", "a__1", "a__2", "b", "c__0", "c__1"]
    a_parts = np.split(a.ravel(), [a_chunk, 2 * a_chunk])
    c_parts = [np.zeros(c_chunk, np.float32), np.zeros(m * n - c_chunk, np.float32)]
    groups = (math.ceil(n / tile), math.ceil(m / tile))
    *_, c0, c1 = run(k, [*a_parts, b.ravel(), *c_parts], [m, n, kk], groups)
    c = np.concatenate([c0, c1]).reshape(m, n)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5 * kk)


def test_an_atomic_buffer_is_not_split():
    with pytest.raises(KernelError, match="cannot take its atomic parameter count in parts"):
        split_buffers(count_positive.specialize(), {"count": (2, 1)})
