"""A GPU backend vs the SpawnML CPU backend vs onnxruntime on MiniLM and PP-OCRv4 det.

All three run in this process, one timed run each per round after a warm-up, and the median
is reported with ratios against onnxruntime. For the GPU backend the table adds kernel launches
and bytes copied to and from the device per inference (read from ``GPUBackend.traffic()``); a
run ends when its outputs are on the host. The adapter is named, and a software adapter (Mesa's
lavapipe, PoCL) is called out: on one, the "GPU" column measures this machine's CPU.

onnxruntime runs its CUDA provider where ``--backend cuda`` is asked and onnxruntime-gpu has it.

Usage: python bench/gpu.py [--backend webgpu|opencl|cuda] [--runs N] [--det-size PIXELS]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def model_cases(det_size: int) -> dict[str, tuple[str, dict[str, np.ndarray]]]:
    """``label -> (ONNX path, feeds)`` for MiniLM (batch 1 x 128) and PP-OCRv4 det."""
    from spawnml_models.assets import asset_file
    from spawnml_models.embeddings import MODEL_ASSET
    from spawnml_models.reference_models import DETECTOR_MEAN, DETECTOR_STD, OCR_ASSET, nchw
    from spawnml_models.synthetic import text_image, token_batch

    rng = np.random.default_rng(7)
    page = text_image(rng, det_size, det_size, lines=3)[None]
    return {
        "MiniLM-L6 int8, 1 x 128": (
            os.fspath(asset_file(MODEL_ASSET, "model.onnx")),
            token_batch(rng, [128]),
        ),
        f"PP-OCRv4 det, 1x3x{det_size}x{det_size}": (
            os.fspath(asset_file(OCR_ASSET, "ch_PP-OCRv4_det_infer.onnx")),
            {"x": nchw((page - DETECTOR_MEAN) / DETECTOR_STD)},
        ),
    }


def runners(path: str, feeds: dict[str, np.ndarray], backend: str) -> dict[str, Callable[[], Any]]:
    """One callable per runtime, each running the model once and returning host arrays."""
    import onnxruntime
    import spawnml

    ort_providers = ["CPUExecutionProvider"]
    if backend == "cuda" and "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        ort_providers.insert(0, "CUDAExecutionProvider")
    sessions = {
        backend: spawnml.InferenceSession(path, providers=[backend]),
        "cpu": spawnml.InferenceSession(path, providers=["cpu"]),
        "onnxruntime": onnxruntime.InferenceSession(path, providers=ort_providers),
    }
    return {name: (lambda s=session: s.run(None, feeds)) for name, session in sessions.items()}


def measure(run: Callable[[], Any], traffic: Callable[[], Any] | None) -> tuple[float, tuple[int, int, int]]:
    """Seconds of one run, and the launches and bytes each way it caused on the GPU."""
    before = _counts(traffic)
    start = time.perf_counter()
    run()
    elapsed = time.perf_counter() - start
    after = _counts(traffic)
    return elapsed, (after[0] - before[0], after[1] - before[1], after[2] - before[2])


def _counts(traffic: Callable[[], Any] | None) -> tuple[int, int, int]:
    if traffic is None:
        return 0, 0, 0
    t = traffic()
    return t.launches, t.bytes_to_device, t.bytes_from_device


def bench(label: str, path: str, feeds: dict[str, np.ndarray], backend: str, runs: int) -> list[str]:
    """The table rows of one model."""
    import spawnml.plugins

    gpu = spawnml.plugins.backends()[backend]
    calls = runners(path, feeds, backend)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for run in calls.values():  # warm-up: compiles kernels, fills pools
        run()
    counts = (0, 0, 0)
    for _ in range(runs):
        for name, run in calls.items():
            elapsed, moved = measure(run, gpu.traffic if name == backend else None)
            times[name].append(elapsed)
            counts = moved if name == backend else counts
    medians = {name: statistics.median(values) * 1e3 for name, values in times.items()}
    ort = medians["onnxruntime"]
    return [
        f"| {label} | {medians[backend]:.1f} | {medians['cpu']:.1f} | {ort:.1f} | "
        f"{medians[backend] / ort:.2f} | {medians['cpu'] / ort:.2f} | {counts[0]} | "
        f"{counts[1] / 1024:.1f} | {counts[2] / 1024:.1f} |"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="webgpu", help="the GPU backend to measure (default: webgpu)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per runtime and model (default: 5)")
    parser.add_argument("--det-size", type=int, default=320, help="PP-OCRv4 det input side (default: 320)")
    args = parser.parse_args()

    import onnxruntime
    import spawnml
    import spawnml.plugins

    backend = spawnml.plugins.backends().get(args.backend)
    if backend is None or not backend.availability().available:
        reason = backend.availability().reason if backend else "not installed"
        raise SystemExit(f"backend {args.backend!r} is unavailable: {reason}")
    adapter = backend.device_name()
    print(f"date: {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical cores")
    print(f"versions: spawnml {spawnml.__version__}, onnxruntime {onnxruntime.__version__}")
    print(f"{args.backend} adapter: {adapter}")
    if any(word in adapter.lower() for word in ("cpu", "llvmpipe", "lavapipe", "pocl", "software")):
        print(f"note: {adapter} is a software device; the {args.backend} column measures this CPU")
    print(f"latency: median of {args.runs} interleaved runs after one warm-up, outputs read back to the host")
    print()
    print(
        f"| model | {args.backend} ms | SpawnML CPU ms | onnxruntime ms | {args.backend}/ort | cpu/ort "
        f"| launches per run | KiB to device | KiB from device |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, (path, feeds) in model_cases(args.det_size).items():
        for row in bench(label, path, feeds, args.backend, args.runs):
            print(row, flush=True)


if __name__ == "__main__":
    main()
