"""Matrix products on a GPU backend against onnxruntime on the CPU, at MiniLM-L6's shapes.

Each case is a one-node MatMul model (float32, and int32 as MiniLM int8's MatMulInteger computes)
run by the GPU backend and by onnxruntime's CPU provider in this process: the median of
interleaved timed runs after one warm-up, each ending with the output on the host, in
milliseconds and GFLOP/s (2 M N K per product). On a software device (lavapipe, PoCL) the GPU
column measures this machine's CPU.

Usage: python bench/gpu_matmul.py [--backend webgpu|opencl|cuda] [--runs N]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np

#: label -> (batch, M, K, N): MiniLM-L6 on 4 sequences of 128 tokens, and one row.
SHAPES = {
    "projection 512x384 @ 384x384": (1, 512, 384, 384),
    "feed-forward in 512x384 @ 384x1536": (1, 512, 384, 1536),
    "feed-forward out 512x1536 @ 1536x384": (1, 512, 1536, 384),
    "scores 48 x 128x32 @ 32x128": (48, 128, 32, 128),
    "values 48 x 128x128 @ 128x32": (48, 128, 128, 32),
    "one row 1x384 @ 384x1536": (1, 1, 384, 1536),
}


def product_model(dtype: np.dtype, a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> bytes:
    from onnx import helper

    element = helper.np_dtype_to_tensor_dtype(dtype)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])],
        "matmul",
        [
            helper.make_tensor_value_info("a", element, a_shape),
            helper.make_tensor_value_info("b", element, b_shape),
        ],
        [helper.make_tensor_value_info("c", element, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def row(label: str, backend: str, dtype: np.dtype, shape: tuple[int, int, int, int], runs: int) -> str:
    """The table row of one product."""
    import onnxruntime
    import spawnml

    batch, m, k, n = shape
    rng = np.random.default_rng(5)
    lead = (batch,) if batch > 1 else ()
    draw = (lambda s: rng.integers(-128, 128, s)) if dtype.kind == "i" else rng.standard_normal
    feeds = {"a": draw((*lead, m, k)).astype(dtype), "b": draw((*lead, k, n)).astype(dtype)}
    model = product_model(dtype, feeds["a"].shape, feeds["b"].shape)
    sessions = {
        backend: spawnml.InferenceSession(model, providers=[backend]),
        "onnxruntime": onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]),
    }
    calls: dict[str, Callable[[], list]] = {
        name: (lambda s=s: s.run(None, feeds)) for name, s in sessions.items()
    }
    outputs = {name: call()[0] for name, call in calls.items()}  # warm-up: compiles kernels, fills pools
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(runs):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    ms = {name: statistics.median(values) * 1e3 for name, values in times.items()}
    flops = 2 * batch * m * n * k
    diff = np.abs(outputs[backend].astype(np.float64) - outputs["onnxruntime"]).max()
    cells = [label, str(dtype)]
    cells += [f"{x:.2f}" for name in calls for x in (ms[name], flops / ms[name] / 1e6)]
    return "| " + " | ".join([*cells, f"{diff:.1e}"]) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="webgpu", help="the GPU backend to measure (default: webgpu)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per runtime and case (default: 5)")
    args = parser.parse_args()

    import onnxruntime
    import spawnml
    import spawnml.plugins

    backend = spawnml.plugins.backends().get(args.backend)
    if backend is None or not backend.availability().available:
        reason = backend.availability().reason if backend else "not installed"
        raise SystemExit(f"backend {args.backend!r} is unavailable: {reason}")
    print(f"date: {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical cores")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"versions: spawnml {spawnml.__version__}, onnxruntime {onnxruntime.__version__}")
    print(f"{args.backend} device: {backend.device_name()}")
    print(f"median of {args.runs} interleaved runs after one warm-up, output read back to the host")
    print()
    columns = [f"{args.backend} ms", f"{args.backend} GFLOP/s", "onnxruntime ms", "onnxruntime GFLOP/s"]
    print("| " + " | ".join(["product", "type", *columns, "max abs diff"]) + " |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for dtype in (np.dtype(np.float32), np.dtype(np.int32)):
        for label, shape in SHAPES.items():
            print(row(label, args.backend, dtype, shape, args.runs), flush=True)


if __name__ == "__main__":
    main()
