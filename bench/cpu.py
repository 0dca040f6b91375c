"""SpawnML CPU vs onnxruntime CPU (and PyTorch CPU) on the reference models: latency, peak memory,
session creation.

Each runtime runs in its own worker subprocess (so peak RSS does not mix); the parent drives the
workers in turn, one timed run each per round, each after SETTLE seconds of rest. All use the same
thread count: the one numpy's BLAS uses, applied to BLAS with threadpoolctl, to SpawnML and
onnxruntime as intra_op_num_threads and to PyTorch with torch.set_num_threads. The load average is
printed at the start and at the end: on a shared machine, only ratios from one interleaved run
compare. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are
unset for the workers.

MobileNetV2: SpawnML runs its port from the torchvision .pth; onnxruntime runs an ONNX file exported
with torch.onnx.export from the same weights in plain torch, into a temporary directory; PyTorch
runs that plain-torch model. PyTorch runs MiniLM as transformers' BertModel over the float
all-MiniLM-L6-v2 SafeTensors (the int8 ONNX file's architecture and shapes; its weights are int8
only on disk, and both ONNX runtimes fold them to float32 products), and PP-OCRv4 det and rec node
by node with its own operators (torch_graph.py). silero-vad has no PyTorch counterpart here.

Usage: python bench/cpu.py [--runs N] [--models NAME ...] [--threads T]

``--corpus [NAME ...]`` times the corpus of bench/corpus.toml instead (bench/corpus.py): SpawnML
against onnxruntime only, each runtime alone in its own process, one after the other, with
``--json FILE`` to keep the results.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

MODELS = ("minilm-b1", "minilm-b8", "ocr-det", "ocr-rec", "mobilenetv2", "silero-vad")
RUNTIMES = ("spawnml", "onnxruntime", "torch")
#: The models PyTorch runs (see :func:`torch_model`).
TORCH_MODELS = frozenset(MODELS) - {"silero-vad"}
UNSET_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
VAD_CHUNKS = 50
#: Seconds of rest before each timed run, so that no thread of the other runtime is still busy:
#: after a run on two threads, onnxruntime's threads spin on for about 40 ms of CPU time and
#: OpenBLAS's (SpawnML's matrix products) for about 100 ms.
SETTLE = 0.25


def model_path(model: str, onnx_dir: str) -> str:
    """The ONNX file of ``model`` (for MobileNetV2, the exported one)."""
    from spawnml_models.assets import asset_file
    from spawnml_models.embeddings import MODEL_ASSET
    from spawnml_models.reference_models import OCR_ASSET, VAD_ASSET

    paths = {
        "minilm-b1": lambda: asset_file(MODEL_ASSET, "model.onnx"),
        "minilm-b8": lambda: asset_file(MODEL_ASSET, "model.onnx"),
        "ocr-det": lambda: asset_file(OCR_ASSET, "ch_PP-OCRv4_det_infer.onnx"),
        "ocr-rec": lambda: asset_file(OCR_ASSET, "ch_PP-OCRv4_rec_infer.onnx"),
        "silero-vad": lambda: asset_file(VAD_ASSET, "silero_vad.onnx"),
        "mobilenetv2": lambda: os.path.join(onnx_dir, "mobilenetv2.onnx"),
    }
    return os.fspath(paths[model]())


def feeds(model: str) -> dict[str, np.ndarray]:
    """Deterministic inputs of one run (for silero-vad, the audio stream under ``audio``)."""
    from spawnml_models.reference_models import DETECTOR_MEAN, DETECTOR_STD, nchw
    from spawnml_models.synthetic import speech, text_image, token_batch

    rng = np.random.default_rng(7)
    if model.startswith("minilm"):
        return token_batch(rng, [128] * (8 if model.endswith("b8") else 1))
    if model == "ocr-det":
        page = text_image(rng, 640, 640, lines=5)[None]
        return {"x": nchw((page - DETECTOR_MEAN) / DETECTOR_STD)}
    if model == "ocr-rec":
        return {"x": nchw(text_image(rng, 48, 320)[None] * 2 - 1)}
    if model == "mobilenetv2":
        return {"image": rng.standard_normal((1, 3, 224, 224), dtype=np.float32)}
    return {"audio": speech(rng, VAD_CHUNKS * 512)[None]}


def run_vad(session: Any, audio: np.ndarray) -> None:
    """Stream ``audio`` through silero-vad in 512-sample chunks with 64 samples of context."""
    state = np.zeros((2, 1, 128), dtype=np.float32)
    context = np.zeros((1, 64), dtype=np.float32)
    rate = np.array(16_000, dtype=np.int64)
    for chunk in np.split(audio, VAD_CHUNKS, axis=1):
        feed = {"input": np.concatenate([context, chunk], axis=1), "state": state, "sr": rate}
        _, state = session.run(None, feed)
        context = chunk[:, -64:]


class TorchModel:
    """A PyTorch model behind the ``run(None, feeds)`` call the worker makes of a session."""

    def __init__(self, forward: Callable[[dict[str, np.ndarray]], Any]) -> None:
        import torch

        self._forward = torch.inference_mode()(forward)

    def run(self, _outputs: None, feeds: dict[str, np.ndarray]) -> Any:
        return self._forward(feeds)


def torch_model(model: str, path: str) -> TorchModel:
    """PyTorch's counterpart of ``model`` (see the module's docstring)."""
    import torch

    if model == "mobilenetv2":
        net = plain_torch_mobilenet_v2()
        return TorchModel(lambda feeds: net(torch.from_numpy(feeds["image"])))
    if model.startswith("minilm"):
        import transformers
        from spawnml_models.assets import asset_file
        from spawnml_models.bert import WEIGHTS_ASSET

        folder = asset_file(WEIGHTS_ASSET, "model.safetensors").parent
        bert = transformers.BertModel.from_pretrained(folder, add_pooling_layer=False).eval()

        def encode(feeds: dict[str, np.ndarray]) -> Any:
            return bert(**{name: torch.from_numpy(ids) for name, ids in feeds.items()}).last_hidden_state

        return TorchModel(encode)
    from torch_graph import torch_runner

    return TorchModel(torch_runner(path, "cpu"))


def prepare_torch(threads: int) -> None:
    """Import PyTorch (and transformers, quietly) and set its thread count, before any timing."""
    import torch
    import transformers

    torch.set_num_threads(threads)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()


def make_session(runtime: str, model: str, path: str, threads: int) -> Any:
    """A CPU session of ``runtime`` for ``model``."""
    if runtime == "torch":
        return torch_model(model, path)
    if runtime == "onnxruntime":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    import spawnml

    options = spawnml.SessionOptions(intra_op_num_threads=threads)
    if model == "mobilenetv2":
        from spawnml_models.mobilenet import load_mobilenet_v2

        return spawnml.InferenceSession(
            load_mobilenet_v2(providers=["cpu"]).graph, options, providers=["cpu"]
        )
    return spawnml.InferenceSession(path, options, providers=["cpu"])


def vm_hwm_mib() -> float:
    """Peak resident set size of this process so far, MiB."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def worker(runtime: str, model: str, path: str, threads: int) -> None:
    """Serve timed runs on stdin commands: ``run`` answers seconds, ``done`` answers peak MiB."""
    import onnxruntime  # noqa: F401
    import spawnml  # noqa: F401  imported before the baseline for every runtime
    from spawnml import plugins
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)
    if runtime == "torch":
        prepare_torch(threads)
    inputs = feeds(model)
    start = time.perf_counter()
    if runtime == "spawnml":  # once per process, like importing onnxruntime: timed on its own
        plugins.registry()
    reply({"plugins": time.perf_counter() - start})
    call: Callable[[Any], Any]
    call = (
        (lambda s: run_vad(s, inputs["audio"])) if model == "silero-vad" else (lambda s: s.run(None, inputs))
    )
    baseline = vm_hwm_mib()
    start = time.perf_counter()
    session = make_session(runtime, model, path, threads)
    reply({"create": time.perf_counter() - start})
    call(session)  # warm-up
    for line in sys.stdin:
        if line.strip() == "done":
            break
        start = time.perf_counter()
        call(session)
        reply({"run": time.perf_counter() - start})
    reply({"peak": vm_hwm_mib() - baseline})


def reply(message: dict[str, float]) -> None:
    """One JSON line to the parent."""
    print(json.dumps(message), flush=True)


def export_mobilenet(directory: str) -> None:
    """Export torchvision's MobileNetV2 (plain torch, ImageNet .pth weights) to ONNX in ``directory``."""
    import torch

    path = os.path.join(directory, "mobilenetv2.onnx")
    dummy = (torch.zeros(1, 3, 224, 224),)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    torch.onnx.export(
        plain_torch_mobilenet_v2(), dummy, path, dynamo=False, input_names=["image"], output_names=["logits"]
    )


def plain_torch_mobilenet_v2() -> Any:
    """torchvision's MobileNetV2 in plain torch (the reference the tests check the port against),
    with the ImageNet .pth weights, in inference mode."""
    import torch
    from spawnml_models.assets import asset_file
    from spawnml_models.mobilenet import WEIGHTS_ASSET, WEIGHTS_FILE

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.torch_mobilenet import MobileNetV2

    model = MobileNetV2()
    model.load_state_dict(torch.load(asset_file(WEIGHTS_ASSET, WEIGHTS_FILE), weights_only=True), strict=True)
    return model.eval()


def worker_env() -> dict[str, str]:
    """This environment without the OpenBLAS overrides."""
    return {key: value for key, value in os.environ.items() if key not in UNSET_ENV}


def start_worker(runtime: str, model: str, path: str, threads: int) -> subprocess.Popen[str]:
    """A worker subprocess for one runtime and model."""
    command = [sys.executable, __file__, "--worker", runtime, model, path, str(threads)]
    return subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=worker_env(), bufsize=1
    )


def ask(process: subprocess.Popen[str], command: str | None = None) -> dict[str, float]:
    """Send ``command`` (if any) to a worker and read its JSON answer."""
    if command is not None:
        process.stdin.write(command + "\n")
        process.stdin.flush()
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"worker exited with {process.wait()}")
    return json.loads(line)


def bench_model(model: str, path: str, threads: int, runs: int) -> dict[str, dict[str, float]]:
    """Median latency, peak memory and session creation per runtime, runs interleaved."""
    runtimes = [runtime for runtime in RUNTIMES if runtime != "torch" or model in TORCH_MODELS]
    workers = {runtime: start_worker(runtime, model, path, threads) for runtime in runtimes}
    results = {
        runtime: {"plugins": ask(process)["plugins"], "create": ask(process)["create"], "times": []}
        for runtime, process in workers.items()
    }
    for _ in range(runs):
        for runtime, process in workers.items():
            time.sleep(SETTLE)
            results[runtime]["times"].append(ask(process, "run")["run"])
    for runtime, process in workers.items():
        results[runtime]["peak"] = ask(process, "done")["peak"]
        process.wait()
    for result in results.values():
        result["median"] = statistics.median(result.pop("times"))
    return results


def blas_threads() -> tuple[int, str]:
    """BLAS thread count and a description of the BLAS, as the workers see it."""
    code = "import json, numpy, threadpoolctl; print(json.dumps(threadpoolctl.threadpool_info()))"
    out = subprocess.run([sys.executable, "-c", code], env=worker_env(), capture_output=True, text=True)
    info = [entry for entry in json.loads(out.stdout) if entry["user_api"] == "blas"]
    if not info:
        return os.cpu_count() or 1, "no BLAS found by threadpoolctl"
    blas = info[0]
    kernel = blas.get("architecture") or "?"
    text = f"{blas['internal_api']} {blas['version']} ({blas['prefix']}), kernel {kernel}"
    return blas["num_threads"], text


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo."""
    with open("/proc/cpuinfo") as info:
        return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "?")


def header(threads: int, blas: str) -> list[str]:
    """Date, machine, versions and thread settings."""
    import onnxruntime
    import spawnml
    import torch

    names = ", ".join(f"{name}={os.environ[name]}" for name in UNSET_ENV if name in os.environ)
    return [
        f"date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"machine: {cpu_model()}, {os.cpu_count()} logical cores, {platform.platform()}",
        f"versions: python {platform.python_version()}, spawnml {getattr(spawnml, '__version__', '?')}, "
        f"onnxruntime {onnxruntime.__version__}, numpy {np.__version__}, torch {torch.__version__}",
        f"BLAS: {blas}",
        f"threads: {threads} for all (SpawnML and onnxruntime intra_op_num_threads, torch.set_num_threads)",
        f"unset for the workers: {names or 'none were set'}",
        load_average("start"),
    ]


def load_average(when: str) -> str:
    """The system's load average now, as a header line."""
    return f"load average at {when} (1, 5, 15 min): " + ", ".join(f"{load:.1f}" for load in os.getloadavg())


def table(rows: dict[str, dict[str, dict[str, float]]], runs: int) -> list[str]:
    """The results as a Markdown table ("–" where PyTorch has no counterpart of a model)."""
    lines = [
        f"latency: median of {runs} interleaved runs after a warm-up, each after {SETTLE} s of rest; "
        "peak: VmHWM growth from session start",
        "create: session creation; SpawnML's plugin loading (once per process, before it) apart",
        "",
        "| model | SpawnML ms | onnxruntime ms | SpawnML/ort | torch ms | SpawnML/torch "
        "| SpawnML peak MiB | ort peak MiB | torch peak MiB "
        "| SpawnML create s | ort create s | SpawnML/ort create | torch create s | SpawnML plugins s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model, result in rows.items():
        s, o = result["spawnml"], result["onnxruntime"]
        t = result.get("torch", {})
        cells = [
            LABELS[model],
            f"{s['median'] * 1e3:.1f}",
            f"{o['median'] * 1e3:.1f}",
            f"{s['median'] / o['median']:.2f}",
            f"{t['median'] * 1e3:.1f}" if t else "–",
            f"{s['median'] / t['median']:.2f}" if t else "–",
            f"{s['peak']:.0f}",
            f"{o['peak']:.0f}",
            f"{t['peak']:.0f}" if t else "–",
            f"{s['create']:.2f}",
            f"{o['create']:.2f}",
            f"{s['create'] / o['create']:.1f}",
            f"{t['create']:.2f}" if t else "–",
            f"{s['plugins']:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


LABELS = {
    "minilm-b1": "MiniLM-L6 int8, batch 1 x 128 (torch: float SafeTensors)",
    "minilm-b8": "MiniLM-L6 int8, batch 8 x 128 (torch: float SafeTensors)",
    "ocr-det": "PP-OCRv4 det, 1x3x640x640",
    "ocr-rec": "PP-OCRv4 rec, 1x3x48x320",
    "mobilenetv2": "MobileNetV2, 1x3x224x224 (SpawnML: .pth port; ort: torch export; torch: plain torch)",
    "silero-vad": f"silero-vad, stream of {VAD_CHUNKS} chunks",
}


def main() -> None:
    """Parse arguments, run the benchmark and print the header and table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--threads", type=int, default=None, help="default: the BLAS thread count")
    parser.add_argument(
        "--corpus",
        nargs="*",
        metavar="NAME",
        help="time the corpus of bench/corpus.toml (default: all its models)",
    )
    parser.add_argument("--manifest", default=None, help="with --corpus: another corpus manifest")
    parser.add_argument("--json", metavar="FILE", help="with --corpus: write the results to FILE as JSON")
    args = parser.parse_args()
    if args.corpus is not None:
        import corpus

        args.manifest = args.manifest or corpus.MANIFEST
        corpus.run(args)
        return
    threads, blas = blas_threads()
    threads = args.threads or threads
    print("\n".join(header(threads, blas)), flush=True)
    rows = {}
    with tempfile.TemporaryDirectory() as directory:
        if "mobilenetv2" in args.models:
            export_mobilenet(directory)
        for model in args.models:
            rows[model] = bench_model(model, model_path(model, directory), threads, args.runs)
            print(f"done: {model}", file=sys.stderr, flush=True)
    print(load_average("end"))
    print("\n".join(table(rows, args.runs)))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
