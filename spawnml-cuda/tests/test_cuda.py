"""The cuda distribution registers its backend, which says why it cannot run without cupy or a GPU."""

from __future__ import annotations

from importlib.metadata import entry_points
from importlib.util import find_spec

import numpy as np
import pytest
from spawnml import plugins
from spawnml.errors import BackendUnavailableError
from spawnml.kernel.ir import f32
from spawnml.kernel.library import matmul
from spawnml_cuda import CUDABackend


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
