"""``spawnml embed``: the cosine similarity of sentences under all-MiniLM-L6-v2."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np
from spawnml.cli import Command

from .embeddings import SentenceEmbeddingPipeline

#: Compared when no sentences are given: two pairs of related meaning.
DEMO_SENTENCES = (
    "A man is playing a guitar.",
    "Someone is strumming an acoustic guitar.",
    "The stock market fell sharply today.",
    "Share prices dropped steeply this afternoon.",
)


def configure_embed(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spawnml embed``."""
    parser.add_argument(
        "sentences", nargs="*", metavar="SENTENCE", help="sentences to compare (default: a demo set)"
    )
    parser.add_argument(
        "--model",
        help="a BERT encoder: ONNX, or model.safetensors with config.json beside it (default: the cached "
        "all-MiniLM-L6-v2 ONNX export)",
    )
    parser.add_argument(
        "--providers",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        help="comma-separated providers in order of preference, e.g. webgpu,cpu",
    )


def run_embed(args: argparse.Namespace) -> int:
    """Embed ``args.sentences`` and print their cosine similarity matrix; timings go to stderr."""
    sentences = args.sentences or list(DEMO_SENTENCES)
    if not args.sentences:
        print("no sentences given: comparing the demo set", file=sys.stderr)
    start = time.perf_counter()
    pipeline = SentenceEmbeddingPipeline(model=args.model, providers=args.providers)
    loaded = time.perf_counter()
    print(f"loaded {args.model or 'all-MiniLM-L6-v2'} in {loaded - start:.2f} s", file=sys.stderr)
    matrix = pipeline.similarity(sentences)
    print(f"embedded {len(sentences)} sentences in {time.perf_counter() - loaded:.3f} s", file=sys.stderr)
    print(similarity_table(sentences, matrix))
    return 0


def similarity_table(sentences: Sequence[str], matrix: np.ndarray, width: int = 48) -> str:
    """``matrix`` as a table: one row per numbered sentence (shortened to ``width``), columns by number."""
    labels = [f"[{i}] {_shorten(sentence, width)}" for i, sentence in enumerate(sentences, 1)]
    label_width = max(len(label) for label in labels)
    cell = max(7, len(f" [{len(sentences)}]"))
    header = " " * label_width + "".join(f"{f'[{j}]':>{cell}}" for j in range(1, len(sentences) + 1))
    rows = [
        f"{label:<{label_width}}" + "".join(f"{value:>{cell}.3f}" for value in row)
        for label, row in zip(labels, matrix, strict=True)
    ]
    return "\n".join([header, *rows])


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


EMBED = Command(
    name="embed",
    help="compare sentences by the cosine similarity of their all-MiniLM-L6-v2 embeddings",
    configure=configure_embed,
    run=run_embed,
)
