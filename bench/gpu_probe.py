"""Measurements ``bench/gpu_check.py`` runs in a child process, each printing one ``JSON {...}`` line.

``probe-cuda``: what the CUDA backend's launch path costs on the host and what a CUDA graph saves.
A chain of small elementwise kernels and cuBLAS products (``cupy.matmul``) is run eagerly and then
captured once on a non-blocking stream and replayed; it reports the host microseconds per eager
launch, the wall time of the chain each way, whether capture works with cuBLAS in the chain, and
whether the replay gives the eager run's bits. Then the products the CUDA runtime makes through
cuBLAS directly (``spawnml_cuda.cublas``, one ``cublasGemmStridedBatchedEx`` call) against
``cupy.matmul`` at MiniLM's shapes: host microseconds per call each way, the largest difference
between the two results, and whether the direct call replays from a captured graph with the same
bits. Without cupy or a device it prints the reason.

``llm-decode``: SmolLM2-135M decode tokens/s on each named GPU backend (weights dequantized to
float32 at load) and on transformers with torch on CUDA where torch sees a GPU.

Usage: python bench/gpu_check.py probe-cuda [--launches N]
       python bench/gpu_check.py llm-decode --path GGUF --backends cuda,webgpu [--tokens N]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any


def emit(found: dict[str, Any]) -> None:
    print("JSON " + json.dumps(found), flush=True)


def cupy_or_reason() -> tuple[Any, str]:
    """``(cupy, "")`` where cupy imports and sees a device, else ``(None, reason)``."""
    try:
        import cupy
    except Exception as error:  # ImportError, or a CUDA library that fails to load
        return None, f"cupy is not importable: {error}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:
        return None, f"cupy finds no CUDA device: {error}"
    if count == 0:
        return None, "cupy finds no CUDA device"
    return cupy, ""


def chain(cupy: Any, x: Any, w: Any, launches: int) -> Any:
    """``launches`` kernel launches: a scaled add, and every eighth a cuBLAS product."""
    for step in range(launches):
        x = cupy.matmul(x, w) if step % 8 == 7 else x * 0.5 + 0.25
    return x


def probe_cuda(launches: int) -> dict[str, Any]:
    cupy, reason = cupy_or_reason()
    if cupy is None:
        return {"available": False, "reason": reason}
    found: dict[str, Any] = {
        "available": True,
        "cupy": cupy.__version__,
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "launches": launches,
    }
    try:
        from cupy_backends.cuda.libs import cublas

        found["cublas_version"] = cublas.getVersion(cupy.cuda.device.get_cublas_handle())
    except Exception as error:
        found["cublas_version"] = f"unknown: {error}"
    try:
        import cupy_backends.cuda.libs.cublaslt  # noqa: F401

        found["cublaslt_binding"] = True
    except Exception as error:
        found["cublaslt_binding"] = f"absent: {error}"
    stream = cupy.cuda.Stream(non_blocking=True)
    rng = cupy.random.default_rng(0)
    x = rng.standard_normal((64, 64), dtype=cupy.float32)
    w = rng.standard_normal((64, 64), dtype=cupy.float32) / 64
    with stream:
        chain(cupy, x, w, launches)  # warm-up: compiles the elementwise kernels, makes the handle
        stream.synchronize()
        start = time.perf_counter()
        eager = chain(cupy, x, w, launches)
        enqueued = time.perf_counter() - start
        stream.synchronize()
        eager_wall = time.perf_counter() - start
    found["eager_host_us_per_launch"] = round(enqueued / launches * 1e6, 2)
    found["eager_ms"] = round(eager_wall * 1e3, 3)
    try:
        with stream:
            stream.begin_capture()
            captured = chain(cupy, x, w, launches)
            graph = stream.end_capture()
            graph.launch(stream)  # the first replay uploads the graph
            stream.synchronize()
            start = time.perf_counter()
            graph.launch(stream)
            replay_host = time.perf_counter() - start
            stream.synchronize()
            replay_wall = time.perf_counter() - start
        found["graph_capture"] = True
        found["graph_host_us_per_replay"] = round(replay_host * 1e6, 2)
        found["graph_ms"] = round(replay_wall * 1e3, 3)
        found["graph_equals_eager"] = bool(cupy.array_equal(captured, eager))
    except Exception as error:
        found["graph_capture"] = f"failed: {type(error).__name__}: {error}"
    try:
        found["cublas_direct"] = direct_products(cupy, stream)
    except Exception as error:
        found["cublas_direct"] = f"failed: {type(error).__name__}: {error}"
    return found


#: ``(count, m, n, k, weight shared across the batch)``: MiniLM-L6's products at 8 x 128 tokens
#: (the feed-forward layers, attention's scores) and one small one.
PRODUCTS = [(1, 1024, 1536, 384, True), (96, 128, 128, 32, False), (1, 128, 384, 384, True)]


def direct_products(cupy: Any, stream: Any, calls: int = 200) -> list[dict[str, Any]]:
    """Each of :data:`PRODUCTS` through cuBLAS directly and through ``cupy.matmul``."""
    from spawnml_cuda.cublas import WORKSPACE_BYTES, Cublas, load_cublas, row_major_product

    workspace = cupy.cuda.alloc(WORKSPACE_BYTES)
    library = Cublas(load_cublas(), stream.ptr, workspace.ptr)
    rng = cupy.random.default_rng(1)
    rows = []
    for count, m, n, k, shared in PRODUCTS:
        a = rng.standard_normal((count, m, k), dtype=cupy.float32)
        b = rng.standard_normal((1 if shared else count, k, n), dtype=cupy.float32)
        direct, through_cupy = (cupy.empty((count, m, n), cupy.float32) for _ in range(2))
        call = row_major_product(
            a.data.ptr, b.data.ptr, direct.data.ptr, count, m, n, k, m * k, 0 if shared else k * n
        )
        with stream:
            host_direct = _host_seconds(stream, calls, partial(library.gemm, call))
            host_cupy = _host_seconds(stream, calls, partial(cupy.matmul, a, b, out=through_cupy))
            stream.begin_capture()
            library.gemm(call)
            graph = stream.end_capture()
            expected = direct.copy()
            direct.fill(cupy.nan)
            graph.launch(stream)
            stream.synchronize()
        rows.append(
            {
                "shape": f"{count} x ({m}x{k} @ {k}x{n})" + (", weight shared" if shared else ""),
                "direct_host_us": round(host_direct * 1e6, 2),
                "cupy_matmul_host_us": round(host_cupy * 1e6, 2),
                "max_abs_diff": float(cupy.abs(expected - through_cupy).max()),
                "graph_replay_equals": bool(cupy.array_equal(direct, expected)),
            }
        )
    return rows


def _host_seconds(stream: Any, calls: int, call: Callable[[], Any]) -> float:
    """Host seconds per call of ``calls`` queued calls (after one warm-up call)."""
    call()
    stream.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    elapsed = time.perf_counter() - start
    stream.synchronize()
    return elapsed / calls


def llm_decode(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="SmolLM2 decode tokens/s on GPU backends and torch")
    parser.add_argument("--path", required=True)
    parser.add_argument("--backends", required=True)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args(argv)
    from spawnml_models.llm import TextGenerationPipeline
    from spawnml_models.llm.cache import KVCache

    ids = list(range(100, 116))
    found: dict[str, Any] = {"tokens": args.tokens, "prompt_tokens": len(ids)}
    for backend in args.backends.split(","):
        try:
            pipeline = TextGenerationPipeline(args.path, providers=[backend], dequantize=True)
            cache = KVCache(pipeline.config)
            pipeline.forward(ids, cache)
            pipeline.forward(ids[-1:], cache)  # warm-up
            start = time.perf_counter()
            for _ in range(args.tokens):
                pipeline.forward(ids[-1:], cache)
            found[f"{backend}_decode_tok_s"] = round(args.tokens / (time.perf_counter() - start), 2)
        except Exception as error:
            found[f"{backend}_decode_tok_s"] = f"failed: {type(error).__name__}: {error}"
    found.update(torch_decode(args.path, ids, args.tokens))
    emit(found)
    return 0


def torch_decode(path: str, ids: list[int], tokens: int) -> dict[str, Any]:
    """transformers' decode tokens/s with its KV cache on CUDA, or why it was not measured."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, DynamicCache
    except Exception as error:
        return {"torch_decode_tok_s": f"not measured: {error}"}
    if not torch.cuda.is_available():
        return {"torch_decode_tok_s": "not measured: torch sees no CUDA device"}
    directory, name = path.rsplit("/", 1)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32).eval().cuda()
    with torch.no_grad():
        prompt = torch.tensor([ids], device="cuda")
        out = model(prompt, past_key_values=DynamicCache(), use_cache=True)
        token = out.logits[:, -1:].argmax(-1)
        out = model(token, past_key_values=out.past_key_values, use_cache=True)  # warm-up
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(tokens):
            token = out.logits[:, -1:].argmax(-1)
            out = model(token, past_key_values=out.past_key_values, use_cache=True)
        torch.cuda.synchronize()
    return {
        "torch_cuda_decode_tok_s": round(tokens / (time.perf_counter() - start), 2),
        "torch": torch.__version__,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="the CUDA launch-path probe")
    parser.add_argument("--launches", type=int, default=400)
    args = parser.parse_args(argv)
    emit(probe_cuda(args.launches))
    return 0
