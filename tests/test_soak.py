"""Soak: many runs with varying shapes keep resident memory flat after warm-up, on the CPU and on WebGPU,
and the GPU runtime's pool and caches stay within their bounds.

CI runs the short counts; ``SPAWNML_SOAK_FULL=1`` runs 10,000 small-model and 500 MiniLM runs
(``pytest tests/test_soak.py -s`` prints the figures). Resident memory is read from /proc/self/statm.
On a CPU adapter (lavapipe, PoCL) device buffers are this process's memory, so the bytes the GPU
runtime holds (live tensors and its pool, itself bounded) are taken out of the resident figure:
what must stay flat is the memory nothing accounts for.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import partial

import numpy as np
import pytest
import spawnml
from spawnml import plugins
from spawnml.gpu import GPUBackend
from spawnml.gpu.backend import CONSTANTS
from spawnml_models.assets import asset_file
from spawnml_models.embeddings import MODEL_ASSET
from spawnml_models.synthetic import token_batch

from tests.backends import backend_or_skip
from tests.fuzz.seeds import onnx_seed
from tests.model_files import require

FULL = os.environ.get("SPAWNML_SOAK_FULL") == "1"
MIB = 1 << 20
#: Growth of resident memory allowed between the end of warm-up and the last run.
GROWTH_BOUND = 16 * MIB


def resident() -> int:
    """This process's resident memory in bytes, from /proc/self/statm."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture(params=["cpu", "webgpu"])
def providers(request: pytest.FixtureRequest) -> list[str]:
    """One backend alone: the models here run whole on each."""
    backend_or_skip(request.param)
    return [request.param]


def soak(session: spawnml.InferenceSession, feeds: Iterator[dict], runs: int, warm_up: int) -> None:
    """Run ``runs`` times; unaccounted resident memory may grow at most :data:`GROWTH_BOUND` after
    ``warm_up`` runs."""
    backend = plugins.backends()[session.get_providers()[0]]
    baseline = 0
    for run in range(runs):
        if run == warm_up:
            baseline = unaccounted(backend)
        if FULL and run > warm_up and run % (runs // 20) == 0:
            print(f"\n  run {run:,}: {memory_line(backend)}", end="", flush=True)
        session.run(None, next(feeds))
    growth = unaccounted(backend) - baseline
    print(
        f"\n{session.get_providers()}: {runs:,} runs ({warm_up} warm-up): {memory_line(backend)}; "
        f"growth {growth / MIB:.1f} MiB (bound {GROWTH_BOUND / MIB:.0f} MiB)"
    )
    assert growth < GROWTH_BOUND, f"resident memory grew {growth / MIB:.1f} MiB"
    if isinstance(backend, GPUBackend):
        assert_gpu_caches_bounded(backend)


def device_bytes_in_process(backend: object) -> int:
    """Bytes a GPU runtime holds that live in this process: all of them on a CPU adapter, else none."""
    if not isinstance(backend, GPUBackend) or "(CPU" not in backend.device_name():
        return 0
    memory = backend.runtime.memory()
    return memory.live + memory.pooled


def unaccounted(backend: object) -> int:
    return resident() - device_bytes_in_process(backend)


def memory_line(backend: object) -> str:
    held = device_bytes_in_process(backend)
    return f"resident {resident() / MIB:.1f} MiB, of which device buffers {held / MIB:.1f} MiB"


def assert_gpu_caches_bounded(gpu: GPUBackend) -> None:
    memory, device = gpu.runtime.memory(), gpu.device()
    print(
        f"{gpu.name} pool: {memory.pooled / MIB:.1f} MiB pooled (bound {gpu.runtime.pool_bytes / MIB:.0f}), "
        f"{memory.live / MIB:.1f} MiB live, {memory.buffers} buffers; {len(device.constants)} constants"
    )
    assert memory.pooled <= gpu.runtime.pool_bytes
    assert len(device.constants) <= CONSTANTS


def small_feeds() -> Iterator[dict]:
    rng = np.random.default_rng(0)
    while True:
        yield {"x": rng.standard_normal((int(rng.integers(1, 65)), 4)).astype(np.float32)}


def minilm_feeds(longest: int) -> Iterator[dict]:
    rng = np.random.default_rng(1)
    while True:
        yield token_batch(rng, rng.integers(3, longest + 1, rng.integers(1, 5)).tolist())


@pytest.mark.slow
def test_small_model_memory_is_flat(providers: list[str]) -> None:
    session = spawnml.InferenceSession(onnx_seed(), providers=providers)
    soak(session, small_feeds(), 10_000 if FULL else 2_000, 200)


@pytest.mark.slow
@pytest.mark.real_model
def test_minilm_memory_is_flat(providers: list[str]) -> None:
    session = spawnml.InferenceSession(
        require(partial(asset_file, MODEL_ASSET, "model.onnx")), providers=providers
    )
    runs = 500 if FULL else (40 if providers == ["cpu"] else 20)
    soak(session, minilm_feeds(128 if FULL else 32), runs, 10)
