"""The cuda distribution registers its backend, which says why it cannot run without cupy or a GPU."""

from __future__ import annotations

from importlib.metadata import entry_points
from importlib.util import find_spec
from typing import cast

import numpy as np
import pytest
import spawnml
from spawnml import plugins
from spawnml.errors import BackendUnavailableError, DeviceMemoryError
from spawnml.ir import Graph, Node, Value
from spawnml.kernel.ir import f32
from spawnml.kernel.library import matmul
from spawnml_cuda import CUDABackend

from tests.backends import backend_or_skip


def test_entry_point_registers_the_backend():
    names = [ep.name for ep in entry_points(group="spawnml") if ep.dist and ep.dist.name == "spawnml-cuda"]
    assert names == ["cuda"]
    assert isinstance(plugins.backends()["cuda"], CUDABackend)


@pytest.mark.skipif(find_spec("cupy") is not None, reason="cupy is installed")
def test_without_cupy_it_is_unavailable_and_says_why():
    backend = plugins.backends()["cuda"]
    status = backend.availability()
    assert not status.available and status.reason.startswith("cupy is not importable")
    with pytest.raises(BackendUnavailableError, match="cuda: cupy is not importable"):
        backend.from_numpy(np.zeros(3, np.float32))


def test_renderer_records_the_block_shape():
    k = matmul.specialize(T=f32, TILE=8)
    source = CUDABackend.renderer.render(k)
    assert CUDABackend.renderer.blocks[source] == (8, 8, 1)
    assert "__launch_bounds__(64)" in source


@pytest.fixture(scope="module")
def cuda() -> CUDABackend:
    return cast(CUDABackend, backend_or_skip("cuda"))


def session_of(
    op: str, *inputs: tuple[str, tuple[int, ...]], out: type = np.float32
) -> spawnml.InferenceSession:
    """``y = op(*inputs)`` over float32 inputs of the given names and shapes, on cuda."""
    graph = Graph(
        nodes=[Node(op, [name for name, _ in inputs], ["y"])],
        inputs=[Value(name, np.dtype(np.float32), shape) for name, shape in inputs],
        outputs=[Value("y", np.dtype(out), None)],
        opset_imports={"": 17},
    )
    return spawnml.InferenceSession(graph, providers=["cuda"])


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "library"),
    [
        ((8, 16), (16, 24), False),  # small: the tiled kernel
        ((192, 256), (256, 160), True),
        ((3, 130, 70), (70, 90), True),  # the weight repeated across the batch
        ((2, 1, 64, 96), (1, 4, 96, 80), True),  # both operands broadcast
    ],
)
def test_large_products_go_to_cublas_and_match_numpy(cuda, monkeypatch, a_shape, b_shape, library):
    calls = []
    original = type(cuda.runtime).library_matmul

    def spy(self, *args, **kwargs):
        calls.append(used := original(self, *args, **kwargs))
        return used

    monkeypatch.setattr(type(cuda.runtime), "library_matmul", spy)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(a_shape, np.float32), rng.standard_normal(b_shape, np.float32)
    (got,) = session_of("MatMul", ("a", a_shape), ("b", b_shape)).run(None, {"a": a, "b": b})
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert calls == [library]


def test_dlpack_shares_memory_with_torch_both_ways(cuda):
    import torch

    source = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)
    tensor = spawnml.Tensor.from_dlpack(source, device="cuda")
    assert tensor._buffer.handle.ptr == source.data_ptr()  # adopted, not copied
    (doubled,) = session_of("Add", ("x", (3, 4)), ("z", (3, 4))).run_with_tensors(
        None, {"x": tensor, "z": tensor}
    )
    back = torch.from_dlpack(doubled)
    assert back.data_ptr() == doubled._buffer.handle.ptr
    torch.testing.assert_close(back, source * 2, rtol=0, atol=0)


def test_dlpack_with_cupy_converts_integers_on_the_device(cuda):
    import cupy

    ints = cupy.arange(-3, 3, dtype=cupy.int64)
    tensor = spawnml.Tensor.from_dlpack(ints, device="cuda")
    assert tensor.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(tensor), np.arange(-3, 3))
    floats = cupy.linspace(0, 1, 7, dtype=cupy.float32)
    shared = spawnml.Tensor.from_dlpack(floats, device="cuda")
    out = cupy.from_dlpack(shared)
    assert out.data.ptr == floats.data.ptr
    cupy.testing.assert_array_equal(out, floats)


def test_host_arrays_are_uploaded(cuda):
    tensor = spawnml.Tensor.from_dlpack(np.ones((2, 2), np.float32), device="cuda")
    assert tensor.device == "cuda"
    np.testing.assert_array_equal(np.asarray(tensor), np.ones((2, 2)))


def test_out_of_memory_is_a_device_memory_error(cuda):
    runtime = cuda.runtime
    with pytest.raises(DeviceMemoryError, match="could not be allocated"):
        runtime.alloc(runtime.max_buffer_bytes - 4096)  # the whole card: cupy's pool cannot
    handle, size = runtime.alloc(1024)  # and the device is still usable
    runtime.free(handle, size)


def test_a_session_replays_as_cuda_graphs(cuda):
    from spawnml_cuda.graph_session import GraphSession

    session = GraphSession(session_of("MatMul", ("a", (3, 130, 70)), ("b", (70, 90))))
    rng = np.random.default_rng(4)
    b = rng.standard_normal((70, 90), np.float32)
    launches = []
    for _ in range(4):
        a = rng.standard_normal((3, 130, 70), np.float32)
        before = cuda.traffic().launches
        (got,) = session.run(None, {"a": a, "b": b})
        launches.append(cuda.traffic().launches - before)
        np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    report = session.report
    assert (report.eager, report.captures, report.replays, report.refused) == (1, 1, 2, {})
    assert launches[0] > 0 and launches[2:] == [0, 0]  # replays launch no kernel one by one


def test_a_shape_that_depends_on_the_data_replays_until_the_data_changes_it(cuda):
    from spawnml_cuda.graph_session import GraphSession

    session = GraphSession(session_of("NonZero", ("x", (4, 5)), out=np.int64))
    rng = np.random.default_rng(5)
    first, second = (rng.standard_normal((4, 5)).astype(np.float32) for _ in range(2))
    first[first > 0.5] = 0
    for x in (first, first, first, second, second):  # warm-up, capture, replay, diverged, eager
        (got,) = session.run(None, {"x": x})
        np.testing.assert_array_equal(got, np.stack(np.nonzero(x)))
    report = session.report
    assert (report.captures, report.replays, report.eager) == (1, 1, 3)
    ((_, reason),) = report.refused.items()
    assert "a value read on the host differs" in reason
