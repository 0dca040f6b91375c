"""SmolLM2-135M-Instruct (Q4_1 GGUF) whole on a GPU backend: its greedy tokens against the CPU
backend's, and the time of each part.

The GPU session must place every node on the GPU (the quantized products and the embedding
lookup read the raw GGUF blocks there, see ``spawnml.gpu.gguf``); the script fails otherwise, or
when the GPU's greedy tokens differ from the CPU's. Each backend runs the prompt once to warm up
(kernel compilation) before the timed run.

Usage: python bench/llm_gpu.py [--provider webgpu|opencl|cuda] [--tokens N] [--prompt TEXT]
"""

from __future__ import annotations

import argparse
import time

from spawnml_models.assets import asset_file
from spawnml_models.llm import TextGenerationPipeline


def greedy(pipeline: TextGenerationPipeline, ids: list[int], tokens: int) -> tuple[list[int], float, float]:
    """The greedy tokens after ``ids``, the prefill's seconds and the decode's seconds per token."""
    list(pipeline.tokens(ids, 1))  # warm-up
    out = list(pipeline.tokens(ids, tokens))
    stats = pipeline.stats
    return out, stats.prefill_seconds, stats.decode_seconds / max(stats.generated_tokens, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", default="webgpu")
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--prompt", default="The capital of France is")
    args = parser.parse_args()
    path = asset_file("smollm2-gguf", "SmolLM2-135M-Instruct.Q4_1.gguf")
    gpu = TextGenerationPipeline(path, providers=[args.provider])
    elsewhere = {provider for _, _, provider in gpu.session.placement()} - {args.provider}
    if elsewhere:
        raise SystemExit(f"nodes placed on {sorted(elsewhere)}, not all on {args.provider}")
    cpu = TextGenerationPipeline(path, providers=["cpu"])
    ids = cpu.tokenizer.encode(args.prompt)
    rows = {
        name: greedy(pipeline, ids, args.tokens) for name, pipeline in (("cpu", cpu), (args.provider, gpu))
    }
    print(f"{len(ids)} prompt tokens, {args.tokens} greedy tokens")
    print(f"{'backend':<8} {'prefill s':>10} {'s/token':>8}  tokens")
    for name, (tokens, prefill, per_token) in rows.items():
        print(f"{name:<8} {prefill:>10.2f} {per_token:>8.3f}  {tokens}")
    if rows["cpu"][0] != rows[args.provider][0]:
        raise SystemExit(f"{args.provider}'s greedy tokens differ from the CPU's")
    print("same tokens")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"{time.perf_counter() - start:.0f} s in all")
