"""A GPU backend vs the SpawnML CPU backend vs onnxruntime (and PyTorch) on MiniLM and PP-OCRv4 det.

All runtimes run in this process, one timed run each per round after two warm-up runs, and the median
is reported with ratios against the reference: PyTorch on the same GPU where torch sees one
(``--backend cuda``), else onnxruntime (with its CUDA provider where onnxruntime-gpu has it). For
the GPU backend the table adds kernel launches and bytes copied to and from the device per
inference (read from ``GPUBackend.traffic()``) and the host's CPU time per run (the thread's CPU
seconds: Python dispatch, argument packing, the runtime's calls; a wait that spins counts too), per
launch; a run ends when its outputs are on the host. onnxruntime runs with its CUDA provider where
onnxruntime-gpu offers it (the column says which). The
adapter is named, and a software adapter (Mesa's lavapipe, PoCL) is called out: on one, the "GPU"
column measures this machine's CPU.

Where the backend's runtime captures graphs (CUDA), the same session also runs through
``spawnml_cuda.graph_session.GraphSession``: each run replays one graph captured at warm-up, and
the table gives its time and host CPU time per run beside the eager ones (before and after), with
its largest difference from onnxruntime; a run that could not be captured says why.

PyTorch runs PP-OCRv4 det node by node with its own operators (``torch_graph.py``) and MiniLM as
transformers' ``BertModel`` with random float32 weights, which SpawnML then runs through its
SafeTensors BERT port; the int8 MiniLM has no PyTorch counterpart.

``--json PATH`` also writes the rows as JSON; ``--only WORDS`` keeps the models whose label holds
one of the comma-separated words (case-insensitive).

Usage: python bench/gpu.py [--backend webgpu|opencl|cuda] [--runs N] [--det-size PIXELS]
                           [--only int8,det] [--json PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

Feeds = dict[str, np.ndarray]


@dataclass
class Case:
    """One model to time: its ONNX file, the feeds, and PyTorch's way to run it, if any."""

    path: str
    feeds: Feeds
    torch_run: Callable[[], Any] | None = None


def model_cases(det_size: int, torch_device: str | None, workdir: str) -> dict[str, Case]:
    """``label -> Case`` for MiniLM (int8, and float32 where PyTorch runs) and PP-OCRv4 det."""
    from spawnml_models.assets import asset_file
    from spawnml_models.embeddings import MODEL_ASSET
    from spawnml_models.reference_models import DETECTOR_MEAN, DETECTOR_STD, OCR_ASSET, nchw
    from spawnml_models.synthetic import text_image, token_batch

    rng = np.random.default_rng(7)
    page = text_image(rng, det_size, det_size, lines=3)[None]
    detector = os.fspath(asset_file(OCR_ASSET, "ch_PP-OCRv4_det_infer.onnx"))
    detector_feeds = {"x": nchw((page - DETECTOR_MEAN) / DETECTOR_STD)}
    detector_torch = None
    if torch_device is not None:
        from torch_graph import torch_runner

        detector_torch = partial(torch_runner(detector, torch_device), detector_feeds)
    cases = {
        "MiniLM-L6 int8, 1 x 128": Case(
            os.fspath(asset_file(MODEL_ASSET, "model.onnx")), token_batch(rng, [128])
        ),
        f"PP-OCRv4 det, 1x3x{det_size}x{det_size}": Case(detector, detector_feeds, detector_torch),
    }
    if torch_device is not None:
        for batch in (1, 8):
            feeds = token_batch(rng, [128] * batch)
            cases[f"MiniLM-L6 fp32, {batch} x 128"] = bert_case(feeds, torch_device, workdir)
    return cases


def bert_case(feeds: Feeds, device: str, workdir: str) -> Case:
    """MiniLM-L6's architecture with random weights: saved as SpawnML's BERT port builds it, and
    run by transformers on ``device``."""
    import spawnml
    import torch
    import transformers
    from spawnml_models.bert import BertConfig, bert_graph

    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536
    )
    model = transformers.BertModel(config, add_pooling_layer=False).eval().to(device)
    weights = {name: value.detach().cpu().numpy() for name, value in model.state_dict().items()}
    graph = bert_graph(BertConfig(384, 12, 6, config.layer_norm_eps), weights)
    path = os.path.join(workdir, f"bert-{len(feeds['input_ids'])}.onnx")
    spawnml.formats.save_onnx(graph, path)
    inputs = {name: torch.from_numpy(array).to(device) for name, array in feeds.items()}

    def run() -> np.ndarray:
        with torch.inference_mode():
            return model(**inputs).last_hidden_state.cpu().numpy()

    return Case(path, feeds, run)


def ort_provider(backend: str) -> str:
    """onnxruntime's provider beside ``backend``: CUDA's where onnxruntime-gpu offers it."""
    import onnxruntime

    cuda = backend == "cuda" and "CUDAExecutionProvider" in onnxruntime.get_available_providers()
    return "CUDAExecutionProvider" if cuda else "CPUExecutionProvider"


def runners(case: Case, backend: str) -> tuple[dict[str, Callable[[], Any]], Any]:
    """One callable per runtime, each running the model once and returning host arrays; and the
    graph session, where the backend captures graphs (None elsewhere)."""
    import onnxruntime
    import spawnml
    import spawnml.plugins

    ort_providers = list(dict.fromkeys([ort_provider(backend), "CPUExecutionProvider"]))
    sessions = {
        backend: spawnml.InferenceSession(case.path, providers=[backend]),
        "cpu": spawnml.InferenceSession(case.path, providers=["cpu"]),
        "onnxruntime": onnxruntime.InferenceSession(case.path, providers=ort_providers),
    }
    calls: dict[str, Callable[[], Any]] = {
        name: partial(session.run, None, case.feeds) for name, session in sessions.items()
    }
    graphs = None
    if captures_graphs(spawnml.plugins.backends()[backend]):
        from spawnml_cuda.graph_session import GraphSession

        graphs = GraphSession(sessions[backend])
        calls[graph_name(backend)] = partial(graphs.run, None, case.feeds)
    if case.torch_run is not None:
        calls["torch"] = case.torch_run
    return calls, graphs


def captures_graphs(gpu: Any) -> bool:
    """Whether ``gpu``'s runtime captures and replays graphs (the CUDA runtime does)."""
    from spawnml_cuda.graphs import CapturingRuntime

    return isinstance(gpu.runtime, CapturingRuntime)


def graph_name(backend: str) -> str:
    return f"{backend} graphs"


def measure(
    run: Callable[[], Any], traffic: Callable[[], Any] | None
) -> tuple[float, float, tuple[int, int, int]]:
    """Seconds of one run, the thread's CPU seconds in it, and the launches and bytes each way it
    caused on the GPU."""
    before = _counts(traffic)
    start, cpu_start = time.perf_counter(), time.thread_time()
    run()
    elapsed, host = time.perf_counter() - start, time.thread_time() - cpu_start
    after = _counts(traffic)
    return elapsed, host, (after[0] - before[0], after[1] - before[1], after[2] - before[2])


def _counts(traffic: Callable[[], Any] | None) -> tuple[int, int, int]:
    if traffic is None:
        return 0, 0, 0
    t = traffic()
    return t.launches, t.bytes_to_device, t.bytes_from_device


def bench(label: str, case: Case, backend: str, runs: int) -> dict[str, Any]:
    """The measurements of one model (:func:`row` makes its table row)."""
    import spawnml.plugins

    gpu = spawnml.plugins.backends()[backend]
    calls, graphs = runners(case, backend)
    # Warm-up, two runs: compiles kernels, fills pools, compiles the plan, captures the graph.
    for run in calls.values():
        run()
    outputs = {name: run() for name, run in calls.items()}
    times: dict[str, list[float]] = {name: [] for name in calls}
    host: dict[str, list[float]] = {backend: [], graph_name(backend): []}
    counts = (0, 0, 0)
    for _ in range(runs):
        for name, run in calls.items():
            traffic = gpu.traffic if name == backend else None  # type: ignore[attr-defined]
            elapsed, cpu, moved = measure(run, traffic)
            times[name].append(elapsed)
            if name == backend:
                counts = moved
            if name in host:
                host[name].append(cpu)
    ms = {name: statistics.median(values) * 1e3 for name, values in times.items()}
    want = np.asarray(outputs["onnxruntime"][0])
    got = np.asarray(outputs[backend][0])
    host_ms = statistics.median(host[backend]) * 1e3
    graph: dict[str, Any] | None = None
    if graphs is not None:
        report = graphs.report
        graph = {
            "host_ms": round(statistics.median(host[graph_name(backend)]) * 1e3, 3),
            "max_abs_diff": float(np.abs(np.asarray(outputs[graph_name(backend)][0]) - want).max()),
            "captures": report.captures,
            "replays": report.replays,
            "refused": report.refused,
        }
    return {
        "model": label,
        "backend": backend,
        "ms": {name: round(value, 3) for name, value in ms.items()},
        "reference": "torch" if "torch" in ms else "onnxruntime",
        "onnxruntime_provider": ort_provider(backend),
        "launches": counts[0],
        "kib_to_device": round(counts[1] / 1024, 1),
        "kib_from_device": round(counts[2] / 1024, 1),
        "host_ms": round(host_ms, 3),
        "host_us_per_launch": round(host_ms * 1e3 / counts[0], 1) if counts[0] else None,
        "max_abs_diff": float(np.abs(got - want).max()),
        "graph": graph,
    }


def row(m: dict[str, Any]) -> str:
    """The Markdown table row of :func:`bench`'s measurements."""
    ms, backend, reference = m["ms"], m["backend"], m["reference"]
    torch_ms = f"{ms['torch']:.2f}" if "torch" in ms else "–"
    ort = " (CUDA)" if m["onnxruntime_provider"] == "CUDAExecutionProvider" else ""
    per_launch = f"{m['host_us_per_launch']:.0f}" if m["host_us_per_launch"] is not None else "–"
    graph, graph_ms, graph_host = m.get("graph"), "–", "–"
    if graph is not None and graph["refused"]:
        graph_ms = "eager: " + "; ".join(graph["refused"].values()).replace("|", "/").replace("\n", " ")
    elif graph is not None:
        graph_ms = f"{ms[graph_name(backend)]:.2f} ({graph['max_abs_diff']:.1e})"
        graph_host = f"{graph['host_ms']:.2f}"
    return (
        f"| {m['model']} | {ms[backend]:.2f} | {ms['cpu']:.2f} | {ms['onnxruntime']:.2f}{ort} | {torch_ms} | "
        f"{ms[backend] / ms[reference]:.2f} ({reference}) | {m['launches']} | {m['host_ms']:.2f} | "
        f"{per_launch} | {graph_ms} | {graph_host} | "
        f"{m['kib_to_device']:.1f} | {m['kib_from_device']:.1f} | {m['max_abs_diff']:.1e} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="webgpu", help="the GPU backend to measure (default: webgpu)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per runtime and model (default: 5)")
    parser.add_argument("--det-size", type=int, default=320, help="PP-OCRv4 det input side (default: 320)")
    parser.add_argument("--only", default="", help="comma-separated words: the models whose label holds one")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()

    import onnxruntime
    import spawnml
    import spawnml.plugins

    backend = spawnml.plugins.backends().get(args.backend)
    if backend is None or not backend.availability().available:
        reason = backend.availability().reason if backend else "not installed"
        raise SystemExit(f"backend {args.backend!r} is unavailable: {reason}")
    adapter = backend.device_name()
    torch_device = gpu_torch_device(args.backend)
    print(f"date: {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical cores")
    print(f"versions: spawnml {spawnml.__version__}, onnxruntime {onnxruntime.__version__}", end="")
    if torch_device:
        import torch

        print(f", torch {torch.__version__} on {torch.cuda.get_device_name()}", end="")
    print(f"\n{args.backend} adapter: {adapter}")
    if any(word in adapter.lower() for word in ("cpu", "llvmpipe", "lavapipe", "pocl", "software")):
        print(f"note: {adapter} is a software device; the {args.backend} column measures this CPU")
    print(
        f"latency: median of {args.runs} interleaved runs after two warm-up runs (a graph captured in the"
        " second), outputs read back to the host"
    )
    print()
    print(
        f"| model | {args.backend} ms | SpawnML CPU ms | onnxruntime ms | torch ms | {args.backend}/reference"
        " | launches per run | host CPU ms per run | host µs per launch | graph ms (max abs diff vs ort)"
        " | graph host CPU ms per run | KiB to device | KiB from device | max abs diff vs ort |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    words = [word.lower() for word in args.only.split(",") if word]
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for label, case in model_cases(args.det_size, torch_device, workdir).items():
            if words and not any(word in label.lower() for word in words):
                continue
            rows.append(bench(label, case, args.backend, args.runs))
            print(row(rows[-1]), flush=True)
            if args.json:
                with open(args.json, "w") as file:
                    json.dump(rows, file, indent=1)


def gpu_torch_device(backend: str) -> str | None:
    """``"cuda"`` when measuring the CUDA backend and PyTorch sees the same kind of GPU, else None."""
    if backend != "cuda":
        return None
    try:
        import torch
    except ImportError:
        return None
    return "cuda" if torch.cuda.is_available() else None


if __name__ == "__main__":
    main()
