"""Embed a corpus of sentences on Ray Data with SpawnML and write the vectors as Parquet.

The corpus is generated (no download): ``--sentences`` distinct sentences built from a small
grammar. Each Ray actor holds one all-MiniLM-L6-v2 pipeline; the Dataset's ``embedding`` column
is written to ``--out`` as Parquet files. Prints sentences per second.

Usage: python spawnml-models/examples/ray_embed_corpus.py [--sentences 100000] [--actors 2]
       [--threads 1] [--batch-size 256] [--out embeddings.parquet] [--num-cpus 2]
"""

from __future__ import annotations

import argparse
import itertools
import time

import ray
from spawnml_models.ray import map_pipeline

SUBJECTS = [
    "The cat",
    "An engineer",
    "My neighbour",
    "The orchestra",
    "A small robot",
    "The river",
    "Our teacher",
]
VERBS = ["watches", "builds", "forgets", "paints", "follows", "measures", "describes", "carries"]
OBJECTS = ["the moon", "a bridge", "old letters", "the harbour", "twelve lanterns", "a quiet song", "the map"]
PLACES = ["at dawn", "in the rain", "near the station", "after lunch", "by the sea", "in winter"]


def corpus(count: int) -> list[str]:
    """``count`` distinct sentences: every combination of the grammar, numbered past its size."""
    combinations = itertools.islice(
        itertools.cycle(itertools.product(SUBJECTS, VERBS, OBJECTS, PLACES)), count
    )
    return [f"{s} {v} {o} {p}, scene {i}." for i, (s, v, o, p) in enumerate(combinations)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sentences", type=int, default=100_000)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="SpawnML threads per actor")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    parser.add_argument("--out", default="embeddings.parquet")
    args = parser.parse_args()
    ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    texts = corpus(args.sentences)
    dataset = ray.data.from_items([{"text": text} for text in texts])
    embedded = map_pipeline(
        dataset, "all-minilm-l6-v2", "text", "embedding",
        actors=args.actors, threads=args.threads, batch_size=args.batch_size,
    )  # fmt: skip
    start = time.perf_counter()
    embedded.write_parquet(args.out)
    seconds = time.perf_counter() - start
    print(
        f"{args.sentences} sentences, {args.actors} actor(s) x {args.threads} thread(s): "
        f"{seconds:.1f} s, {args.sentences / seconds:.0f} sentences/s -> {args.out}"
    )


if __name__ == "__main__":
    main()
