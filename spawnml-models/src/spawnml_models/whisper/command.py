"""``spawnml transcribe``: the timed segments of an audio file, transcribed with Whisper."""

from __future__ import annotations

import argparse
import sys
import time

from spawnml.cli import Command

from ..audio_io import FILE_HELP, read_audio
from .audio import SAMPLE_RATE
from .pipeline import SpeechRecognitionPipeline


def configure_transcribe(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spawnml transcribe``."""
    parser.add_argument("audio", metavar="AUDIO", help=FILE_HELP)
    parser.add_argument(
        "--model", help="a CTranslate2 Whisper folder (model.bin, config.json, tokenizer.json)"
    )
    parser.add_argument(
        "--providers",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        help="comma-separated providers in order of preference, e.g. webgpu,cpu",
    )


def run_transcribe(args: argparse.Namespace) -> int:
    """Print one ``[start -> end] text`` line per segment; timings go to stderr."""
    audio = read_audio(args.audio, SAMPLE_RATE)
    start = time.perf_counter()
    pipeline = SpeechRecognitionPipeline(args.model, providers=args.providers)
    loaded = time.perf_counter()
    print(f"loaded the model in {loaded - start:.2f} s", file=sys.stderr)
    for segment in pipeline.segments(audio):
        print(f"[{segment.start:6.2f} -> {segment.end:6.2f}]{segment.text}", flush=True)
    print(
        f"{len(audio) / SAMPLE_RATE:.2f} s of audio in {time.perf_counter() - loaded:.2f} s", file=sys.stderr
    )
    return 0


TRANSCRIBE = Command(
    name="transcribe",
    help="transcribe the speech in an audio file with Whisper",
    configure=configure_transcribe,
    run=run_transcribe,
)
