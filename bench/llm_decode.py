"""Prefill and decode tokens/s of SmolLM2-135M-Instruct (Q4_1 GGUF): SpawnML CPU vs transformers.

All run the same file with the same prompt and greedy decoding, each after a warm-up run of the
prompt; transformers dequantizes to float32 at load, SpawnML runs both its graphs (QuantizedMatMul
on raw blocks, and weights dequantized at load), and llama.cpp (where llama-cpp-python is
installed) its own kernels on the raw blocks, with torch's thread count. Each computes the logits
of every prompt position. Each SpawnML graph runs in a process of its own, which reports its peak
resident memory (``VmHWM``: the interpreter and its libraries, the weights and the cache).

``--block-types`` measures instead SpawnML's decode steps (after the prompt, through the KV cache)
with every quantized weight of the file, the tied output head included, requantized to each
32-element block type with gguf-py, and with the file's own weights, in turns. The K-quants are
left out: SmolLM2's rows of 576 are not whole 256-element super-blocks.

Usage: python bench/llm_decode.py [--tokens N] [--prompt TEXT] [--block-types]
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing
import resource
import time

import spawnml
from spawnml_models.assets import asset_file
from spawnml_models.llm import TextGenerationPipeline
from spawnml_models.llm.cache import KVCache
from spawnml_models.llm.graph import build_llama_graph, float32_weight


def spawnml_rates(path: str, ids: list[int], tokens: int, dequantize: bool) -> tuple[float, float, float]:
    """(prefill, decode) tokens/s of SpawnML on the CPU backend, and the peak resident MiB of a
    process that ran only this (call it in a fresh process)."""
    pipeline = TextGenerationPipeline(path, providers=["cpu"], dequantize=dequantize)
    for _ in pipeline.tokens(ids, 2):  # warm-up: compiles the numba loops, fills the caches
        pass
    for _ in pipeline.tokens(ids, tokens):
        pass
    return pipeline.stats.prefill_rate, pipeline.stats.decode_rate, peak_resident_mib()


def peak_resident_mib() -> float:
    """This process's peak resident memory in MiB: Linux's ``VmHWM``, which starts anew at
    ``exec`` (``ru_maxrss`` keeps the peak of the process it was forked from)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB where there is no VmHWM


def spawnml_rates_apart(
    path: str, ids: list[int], tokens: int, dequantize: bool
) -> tuple[float, float, float]:
    """:func:`spawnml_rates` in a child process, so that its peak memory is its own."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(spawnml_rates, (path, ids, tokens, dequantize))


def torch_rates(path: str, ids: list[int], tokens: int) -> tuple[float, float]:
    """(prefill, decode) tokens/s of transformers with its KV cache, greedy, same token count."""
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    directory, name = path.rsplit("/", 1)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32).eval()
    with torch.no_grad():
        model(torch.tensor([ids]), past_key_values=DynamicCache(), use_cache=True)  # warm-up
        cache, start = DynamicCache(), time.perf_counter()
        out = model(torch.tensor([ids]), past_key_values=cache, use_cache=True)
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(tokens - 1):
            token = out.logits[:, -1:].argmax(-1)
            out = model(token, past_key_values=out.past_key_values, use_cache=True)
        decode = time.perf_counter() - start
    return len(ids) / prefill, (tokens - 1) / decode


def llama_cpp_rates(path: str, ids: list[int], tokens: int) -> tuple[float, float] | None:
    """(prefill, decode) tokens/s of llama.cpp (llama-cpp-python) on the same file and thread count,
    greedy over every position's logits as the others; None where it is not installed."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    import numpy as np
    import torch

    llm = Llama(
        model_path=path,
        n_ctx=len(ids) + tokens,
        n_threads=torch.get_num_threads(),
        logits_all=True,
        verbose=False,
    )
    llm.eval(ids)  # warm-up
    llm.reset()
    start = time.perf_counter()
    llm.eval(ids)
    prefill = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(tokens - 1):
        llm.eval([int(np.argmax(llm.scores[llm.n_tokens - 1]))])
    decode = time.perf_counter() - start
    return len(ids) / prefill, (tokens - 1) / decode


#: The types measured by ``--block-types``, besides the file's own.
BLOCK_TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")


def as_block_type(weights: spawnml.ir.Graph, kind: str) -> spawnml.ir.Graph:
    """The GGUF weights graph with every quantized weight requantized to ``kind`` blocks."""
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    out = copy.copy(weights)
    out.initializers, out.metadata = dict(weights.initializers), dict(weights.metadata)
    for key in [key for key in weights.metadata if key.startswith("gguf.quant_type.")]:
        name = key.removeprefix("gguf.quant_type.")
        out.initializers[name] = quantize(float32_weight(weights, name), GGMLQuantizationType[kind])
        out.metadata[key] = kind
    return out


def decode_rate(pipeline: TextGenerationPipeline, ids: list[int], tokens: int) -> float:
    """Decode steps per second of ``pipeline``'s session after the prompt ``ids``."""
    cache = KVCache(pipeline.config)
    pipeline.forward(ids, cache)
    pipeline.forward(ids[-1:], cache)  # warm-up: repacks the weights, compiles the loops
    start = time.perf_counter()
    for _ in range(tokens):
        pipeline.forward(ids[-1:], cache)
    return tokens / (time.perf_counter() - start)


def block_type_rates(path: str, ids: list[int], tokens: int, rounds: int = 2) -> None:
    """Print the decode tokens/s of SpawnML's default graph with the weights held as each block
    type, ``rounds`` times in turns (the machine's load changes while they run)."""
    pipeline = TextGenerationPipeline(path, providers=["cpu"])
    weights = spawnml.load(path)
    sessions = {"file (Q4_1, Q8_0 head)": pipeline.session} | {
        kind: spawnml.InferenceSession(build_llama_graph(as_block_type(weights, kind)), providers=["cpu"])
        for kind in BLOCK_TYPES
    }
    for _ in range(rounds):
        for kind, session in sessions.items():
            pipeline.session = session
            print(f"{kind:<24} decode {decode_rate(pipeline, ids, tokens):7.2f} tokens/s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--prompt", default="Explain gravity to a child in three sentences.")
    parser.add_argument("--block-types", action="store_true", help="decode per GGML block type")
    args = parser.parse_args()
    path = str(asset_file("smollm2-gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    probe = TextGenerationPipeline(path, dequantize=True)
    ids = probe.tokenizer.encode(probe.prompt(args.prompt))
    del probe
    if args.block_types:
        block_type_rates(path, ids, args.tokens)
        return
    rows: dict[str, tuple[float, ...]] = {
        "transformers (float32)": torch_rates(path, ids, args.tokens),
        "spawnml cpu, dequantized": spawnml_rates_apart(path, ids, args.tokens, dequantize=True),
        "spawnml cpu, QuantizedMatMul": spawnml_rates_apart(path, ids, args.tokens, dequantize=False),
    }
    llama_cpp = llama_cpp_rates(path, ids, args.tokens)
    if llama_cpp is None:
        print("llama.cpp: not measured (pip install llama-cpp-python builds it)")
    else:
        rows["llama.cpp (Q4_1 blocks)"] = llama_cpp
    base_prefill, base_decode = rows["transformers (float32)"]
    print(f"{len(ids)} prompt tokens, {args.tokens} generated; tokens/s (ratio to transformers)")
    for name, (prefill, decode, *peak) in rows.items():
        memory = f"   peak {peak[0]:5.0f} MiB" if peak else ""
        print(
            f"{name:<30} prefill {prefill:8.1f} ({prefill / base_prefill:5.2f}x)"
            f"   decode {decode:7.2f} ({decode / base_decode:5.2f}x){memory}"
        )


if __name__ == "__main__":
    main()
