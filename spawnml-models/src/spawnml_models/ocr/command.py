"""``spawnml ocr IMAGE``: the text lines of an image, with their boxes and scores."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from spawnml.cli import Command

from .pipeline import OCRPipeline, TextLine


def configure_ocr(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spawnml ocr``."""
    parser.add_argument("image", metavar="IMAGE", help="image file to read (any format Pillow opens)")
    parser.add_argument(
        "--providers",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        help="comma-separated providers in order of preference, e.g. webgpu,cpu",
    )


def run_ocr(args: argparse.Namespace) -> int:
    """Read ``args.image`` and print one line per text line found; timings go to stderr."""
    start = time.perf_counter()
    pipeline = OCRPipeline(providers=args.providers)
    loaded = time.perf_counter()
    print(f"loaded PP-OCRv4 in {loaded - start:.2f} s", file=sys.stderr)
    lines = pipeline(args.image)
    print(f"read {len(lines)} lines in {time.perf_counter() - loaded:.2f} s", file=sys.stderr)
    print(format_lines(lines))
    return 0


def format_lines(lines: Sequence[TextLine]) -> str:
    """One row per line: its four corners as ``x,y``, its score, then its text."""
    return "\n".join(
        " ".join(f"{x:.0f},{y:.0f}" for x, y in line.box) + f"  {line.score:.3f}  {line.text}"
        for line in lines
    )


OCR = Command(
    name="ocr",
    help="find and read the text lines of an image with PP-OCRv4",
    configure=configure_ocr,
    run=run_ocr,
)
