"""``spawnml generate``: text from a llama or qwen2 GGUF model; the text on stdout, progress on stderr."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from spawnml.cli import Command
from spawnml.plugins import models

from .pipeline import TextGenerationPipeline
from .sampling import Sampler


def configure_generate(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spawnml generate``."""
    parser.add_argument("model", help="a GGUF file, or a registered text-generation model name")
    parser.add_argument("prompt", help="the user message (or, with --raw, the exact prompt text)")
    parser.add_argument("--max-tokens", type=int, default=128, help="most tokens to generate (default 128)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 is greedy (default)")
    parser.add_argument("--top-k", type=int, default=0, help="sample among the K likeliest tokens (0: all)")
    parser.add_argument("--top-p", type=float, default=1.0, help="sample within probability mass P (1: all)")
    parser.add_argument("--seed", type=int, help="seed of the sampler")
    parser.add_argument("--stop", action="append", default=[], help="stop before this text (repeatable)")
    parser.add_argument(
        "--raw", action="store_true", help="send the prompt as it is, without the chat template"
    )
    parser.add_argument(
        "--dequantize", action="store_true", help="expand quantized weights to float32 at load"
    )
    parser.add_argument(
        "--providers",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        help="comma-separated providers in order of preference, e.g. webgpu,cpu",
    )


def load_pipeline(model: str, **options: Any) -> TextGenerationPipeline:
    """The pipeline for a registered model name, or for a GGUF file path."""
    spec = models().get(model)
    if spec is not None and spec.task == "text-generation":
        return spec(**options)
    return TextGenerationPipeline(model, **options)


def run_generate(args: argparse.Namespace) -> int:
    """Stream the generated text to stdout; report load time and tokens per second on stderr."""
    start = time.perf_counter()
    pipeline = load_pipeline(args.model, providers=args.providers, dequantize=args.dequantize)
    print(f"loaded {args.model} in {time.perf_counter() - start:.2f} s", file=sys.stderr)
    sampler = Sampler(args.temperature, args.top_k, args.top_p, args.seed)
    for piece in pipeline.stream(args.prompt, args.max_tokens, sampler, args.stop, args.raw):
        sys.stdout.write(piece)
        sys.stdout.flush()
        stats = pipeline.stats
        print(f"\r{stats.generated_tokens} tokens, {stats.decode_rate:.1f} tokens/s", end="", file=sys.stderr)
    sys.stdout.write("\n")
    stats = pipeline.stats
    print(
        f"\rprompt: {stats.prompt_tokens} tokens in {stats.prefill_seconds:.2f} s "
        f"({stats.prefill_rate:.1f} tokens/s); generated: {stats.generated_tokens} tokens "
        f"({stats.decode_rate:.1f} tokens/s)",
        file=sys.stderr,
    )
    return 0


GENERATE = Command(
    name="generate",
    help="generate text with a llama or qwen2 GGUF model",
    configure=configure_generate,
    run=run_generate,
)
