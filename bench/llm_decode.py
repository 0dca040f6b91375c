"""Prefill and decode tokens/s of SmolLM2-135M-Instruct (Q4_1 GGUF): SpawnML CPU vs transformers.

All run the same file with the same prompt and greedy decoding, each after a warm-up run of the
prompt; transformers dequantizes to float32 at load, SpawnML runs both its graphs (QuantizedMatMul
on raw blocks, and weights dequantized at load), and llama.cpp (where llama-cpp-python is
installed) its own kernels on the raw blocks, with torch's thread count. Each computes the logits
of every prompt position. Usage: python bench/llm_decode.py [--tokens N] [--prompt TEXT]
"""

from __future__ import annotations

import argparse
import time

import torch
from spawnml_models.assets import asset_file
from spawnml_models.llm import TextGenerationPipeline
from transformers import AutoModelForCausalLM, DynamicCache


def spawnml_rates(path: str, ids: list[int], tokens: int, dequantize: bool) -> tuple[float, float]:
    """(prefill, decode) tokens/s of SpawnML on the CPU backend."""
    pipeline = TextGenerationPipeline(path, providers=["cpu"], dequantize=dequantize)
    for _ in pipeline.tokens(ids, 2):  # warm-up: compiles the numba loops, fills the caches
        pass
    for _ in pipeline.tokens(ids, tokens):
        pass
    return pipeline.stats.prefill_rate, pipeline.stats.decode_rate


def torch_rates(path: str, ids: list[int], tokens: int) -> tuple[float, float]:
    """(prefill, decode) tokens/s of transformers with its KV cache, greedy, same token count."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--prompt", default="Explain gravity to a child in three sentences.")
    args = parser.parse_args()
    path = str(asset_file("smollm2-gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    probe = TextGenerationPipeline(path, dequantize=True)
    ids = probe.tokenizer.encode(probe.prompt(args.prompt))
    del probe
    rows = {
        "transformers (float32)": torch_rates(path, ids, args.tokens),
        "spawnml cpu, dequantized": spawnml_rates(path, ids, args.tokens, dequantize=True),
        "spawnml cpu, QuantizedMatMul": spawnml_rates(path, ids, args.tokens, dequantize=False),
    }
    llama_cpp = llama_cpp_rates(path, ids, args.tokens)
    if llama_cpp is None:
        print("llama.cpp: not measured (pip install llama-cpp-python builds it)")
    else:
        rows["llama.cpp (Q4_1 blocks)"] = llama_cpp
    base_prefill, base_decode = rows["transformers (float32)"]
    print(f"{len(ids)} prompt tokens, {args.tokens} generated; tokens/s (ratio to transformers)")
    for name, (prefill, decode) in rows.items():
        print(
            f"{name:<30} prefill {prefill:8.1f} ({prefill / base_prefill:5.2f}x)"
            f"   decode {decode:7.2f} ({decode / base_decode:5.2f}x)"
        )


if __name__ == "__main__":
    main()
