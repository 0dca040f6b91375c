"""One session used from 8 threads at once answers exactly as serial runs, on the CPU and on each GPU
backend (with the CPU running what the GPU does not yet); sessions on different backends don't interfere.

The reference is the same session's serial answer: every threaded answer must equal it bit for bit,
while other processes keep every core busy (how a kernel splits its work must not follow load).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import spawnml
from spawnml_models.assets import asset_file
from spawnml_models.embeddings import MODEL_ASSET
from spawnml_models.reference_models import OCR_ASSET, detector_feeds
from spawnml_models.synthetic import token_batch

from tests.backends import GPU_BACKENDS, backend_or_skip
from tests.fuzz.seeds import onnx_seed
from tests.model_files import require

THREADS = 8
Feeds = dict[str, np.ndarray]
Job = tuple[spawnml.InferenceSession, Feeds]
MINILM = partial(asset_file, MODEL_ASSET, "model.onnx")
DETECTOR = partial(asset_file, OCR_ASSET, "ch_PP-OCRv4_det_infer.onnx")


@pytest.fixture(autouse=True)
def busy_cores() -> Iterator[None]:
    """A process spinning on each core for the test's length."""
    spin = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end: pass"
    spinners = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def available(name: str) -> list[str]:
    """``[name, "cpu"]`` (the CPU runs what ``name`` does not yet); skips where ``name`` has no device."""
    backend_or_skip(name)
    return [name] if name == "cpu" else [name, "cpu"]


@pytest.fixture(params=["cpu", *GPU_BACKENDS])
def providers(request: pytest.FixtureRequest) -> list[str]:
    return available(request.param)


def minilm_batches(count: int) -> Iterator[Feeds]:
    """``count`` batches of 1 to 3 sentences of 3 to 32 tokens."""
    rng = np.random.default_rng(7)
    for _ in range(count):
        yield token_batch(rng, rng.integers(3, 33, rng.integers(1, 4)).tolist())


def small_batches(count: int) -> Iterator[Feeds]:
    rng = np.random.default_rng(3)
    for batch in range(1, count + 1):
        yield {"x": rng.standard_normal((batch, 4)).astype(np.float32)}


def assert_threads_agree(jobs: list[Job], repeats: int = 3) -> None:
    """Each job, run ``repeats`` times from ``THREADS`` threads in shuffled order, equals its serial run."""
    serial = [session.run(None, feeds) for session, feeds in jobs]
    order = [index for index in range(len(jobs)) for _ in range(repeats)]
    random.Random(0).shuffle(order)
    with ThreadPoolExecutor(THREADS) as pool:
        answers = list(pool.map(lambda index: (index, jobs[index][0].run(None, jobs[index][1])), order))
    for index, outputs in answers:
        for got, expected in zip(outputs, serial[index], strict=True):
            np.testing.assert_array_equal(got, expected)


def session_of(locate: Callable[[], Path], providers: list[str]) -> spawnml.InferenceSession:
    return spawnml.InferenceSession(require(locate), providers=providers)


@pytest.fixture
def frequent_switches() -> Iterator[None]:
    """Threads switch every microsecond instead of every 5 ms, so that races show: without its
    per-kernel lock, the OpenCL runtime gave 22 wrong answers of 640 here."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def test_small_model_from_8_threads(providers: list[str], frequent_switches: None) -> None:
    """Every thread launches the same few kernels with its own buffers and sizes."""
    session = spawnml.InferenceSession(onnx_seed(), providers=providers)
    assert_threads_agree([(session, feeds) for feeds in small_batches(16)], repeats=8)


@pytest.mark.real_model
def test_minilm_from_8_threads(providers: list[str]) -> None:
    session = session_of(MINILM, providers)
    assert_threads_agree([(session, feeds) for feeds in minilm_batches(4)], repeats=2)


@pytest.mark.real_model
def test_ocr_detector_from_8_threads(providers: list[str]) -> None:
    session = session_of(DETECTOR, providers)
    assert_threads_agree([(session, feeds) for feeds in list(detector_feeds())[:2]], repeats=2)


@pytest.mark.real_model
def test_two_models_interleaved() -> None:
    minilm = session_of(MINILM, ["cpu"])
    detector = session_of(DETECTOR, ["cpu"])
    small = spawnml.InferenceSession(onnx_seed())
    jobs: list[Job] = [(minilm, feeds) for feeds in minilm_batches(4)]
    jobs += [(detector, feeds) for feeds in list(detector_feeds())[:2]]
    jobs += [(small, feeds) for feeds in small_batches(4)]
    assert_threads_agree(jobs, repeats=2)


@pytest.mark.real_model
def test_sessions_on_different_backends_interleaved() -> None:
    """MiniLM on WebGPU, the detector on OpenCL and a small model on the CPU, from one pool of threads."""
    minilm = session_of(MINILM, available("webgpu"))
    detector = session_of(DETECTOR, available("opencl"))
    small = spawnml.InferenceSession(onnx_seed())
    jobs: list[Job] = [(minilm, feeds) for feeds in minilm_batches(3)]
    jobs += [(detector, feeds) for feeds in list(detector_feeds())[:2]]
    jobs += [(small, feeds) for feeds in small_batches(4)]
    assert_threads_agree(jobs, repeats=2)
