"""Neighbours: does SpawnML slow onnxruntime in one process, and onnxruntime SpawnML?

A library should not change its neighbours' speed. For each model, each runtime is timed in a
fresh process three ways:

- ``alone``: only that runtime is imported;
- ``loaded``: the other runtime is imported too (for SpawnML, its CPU plugin loaded), has made a
  session on the same model and run it three times, then stays idle while the timed runs go;
- ``interleaved``: as ``loaded``, and the other runtime runs once before each timed run, so the
  timed run starts while anything it left behind (spinning BLAS threads, moved threads, a changed
  allocator) is fresh.

The ratios ``loaded / alone`` and ``interleaved / alone`` are what the neighbour costs; 1.0 is no
cost. ``interleaved`` also pays for the caches the other run evicted, which is not a side effect:
compare it with the same figure for the other runtime. Rounds alternate the three ways so that a
machine's changing load falls on all of them; medians of each way's per-process medians are
reported, with the load average before and after (on a shared machine, only ratios from one run
compare). Both runtimes use their default thread count unless ``--threads`` is given
(onnxruntime's ``intra_op_num_threads``, SpawnML's ``SessionOptions.intra_op_num_threads``).

Usage: python bench/neighbours.py [--models minilm ocr-det] [--runs 20] [--rounds 3] [--threads T]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

MODELS = ("minilm", "ocr-det")
RUNTIMES = ("onnxruntime", "spawnml")
WAYS = ("alone", "loaded", "interleaved")


def model_path(model: str) -> str:
    from spawnml_models.assets import asset_file
    from spawnml_models.embeddings import MODEL_ASSET
    from spawnml_models.reference_models import OCR_ASSET

    if model == "minilm":
        return os.fspath(asset_file(MODEL_ASSET, "model.onnx"))
    return os.fspath(asset_file(OCR_ASSET, "ch_PP-OCRv4_det_infer.onnx"))


def feeds(model: str) -> dict[str, np.ndarray]:
    """One run's inputs: MiniLM on one 128-token sentence, the detector on a 320x320 page."""
    from spawnml_models.reference_models import DETECTOR_MEAN, DETECTOR_STD, nchw
    from spawnml_models.synthetic import text_image, token_batch

    rng = np.random.default_rng(7)
    if model == "minilm":
        return token_batch(rng, [128])
    page = text_image(rng, 320, 320, lines=3)[None]
    return {"x": nchw((page - DETECTOR_MEAN) / DETECTOR_STD)}


def session(runtime: str, path: str, threads: int) -> Any:
    """A CPU session of ``runtime`` (0 threads: the runtime's default)."""
    if runtime == "onnxruntime":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    import spawnml

    return spawnml.InferenceSession(
        path, spawnml.SessionOptions(intra_op_num_threads=threads), providers=["cpu"]
    )


def worker(runtime: str, model: str, way: str, runs: int, threads: int) -> None:
    """Time ``runs`` runs of ``runtime`` on ``model`` the ``way`` asked; prints the median in ms."""
    path, inputs = model_path(model), feeds(model)
    timed = session(runtime, path, threads)
    neighbour = None
    if way != "alone":
        other = next(name for name in RUNTIMES if name != runtime)
        neighbour = session(other, path, threads)
        for _ in range(3):
            neighbour.run(None, inputs)
    for _ in range(2):  # warm-up
        timed.run(None, inputs)
    times = []
    for _ in range(runs):
        if way == "interleaved" and neighbour is not None:
            neighbour.run(None, inputs)
        start = time.perf_counter()
        timed.run(None, inputs)
        times.append(time.perf_counter() - start)
    print(json.dumps({"ms": 1000 * statistics.median(times)}))


def measure(runtime: str, model: str, way: str, runs: int, threads: int) -> float:
    command = [sys.executable, __file__, "--worker", runtime, model, way, str(runs), str(threads)]
    env = {"SPAWNML_PLUGINS": "cpu,onnx", **os.environ}  # the CPU backend and the ONNX loader only
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{runtime} {model} {way} failed:\n{done.stderr}")
    return float(json.loads(done.stdout.splitlines()[-1])["ms"])


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="both runtimes' threads (0: defaults)")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        runtime, model, way, runs, threads = args.worker
        worker(runtime, model, way, int(runs), int(threads))
        return
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, load average {load_average()}")
    print(f"threads: {args.threads or 'defaults'}, {args.runs} runs a process, {args.rounds} rounds")
    print("| model | timed | alone ms | loaded ms | interleaved ms | loaded / alone | interleaved / alone |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for model in args.models:
        for runtime in RUNTIMES:
            seen: dict[str, list[float]] = {way: [] for way in WAYS}
            for _ in range(args.rounds):
                for way in WAYS:
                    seen[way].append(measure(runtime, model, way, args.runs, args.threads))
            ms = {way: statistics.median(values) for way, values in seen.items()}
            print(
                f"| {model} | {runtime} | {ms['alone']:.2f} | {ms['loaded']:.2f} | {ms['interleaved']:.2f} "
                f"| {ms['loaded'] / ms['alone']:.2f} | {ms['interleaved'] / ms['alone']:.2f} |"
            )
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
