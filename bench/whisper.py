"""Whisper tiny.en transcription speed: SpawnML (any providers) vs faster-whisper (CTranslate2) on the CPU.

Both transcribe the same audio (beckett.wav, repeated ``--repeat`` times) from the same
CTranslate2 files with greedy settings; the best of ``--runs`` runs is reported, with the
encoder's time per 30 s window and the decoder's tokens per second for SpawnML.
Usage: python bench/whisper.py [--runs N] [--repeat N] [--providers cpu] [--threads N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from faster_whisper import WhisperModel
from spawnml_models.assets import asset_file
from spawnml_models.vad import SAMPLE_RATE, read_wav
from spawnml_models.whisper import SpeechRecognitionPipeline, log_mel_spectrogram
from spawnml_models.whisper.audio import fit_window
from spawnml_models.whisper.pipeline import MODEL_ASSET

GREEDY = {"beam_size": 1, "temperature": 0.0, "vad_filter": False, "condition_on_previous_text": False}


def best(runs: int, work) -> float:
    """The shortest of ``runs`` timings of ``work()``, in seconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="copies of beckett.wav back to back")
    parser.add_argument("--providers", default="cpu", help="comma-separated SpawnML providers")
    parser.add_argument("--threads", type=int, default=2, help="CTranslate2's CPU threads")
    args = parser.parse_args()
    folder = asset_file(MODEL_ASSET, "model.bin").parent
    audio = np.tile(read_wav(asset_file("beckett-speech", "beckett.wav")), args.repeat)
    seconds = len(audio) / SAMPLE_RATE

    start = time.perf_counter()
    pipeline = SpeechRecognitionPipeline(folder, providers=args.providers.split(","))
    load = time.perf_counter() - start
    window = fit_window(log_mel_spectrogram(audio)[:, :3000])
    encode = best(args.runs, lambda: pipeline.encode(window))
    encoded = pipeline.encode(window)
    tokens = len(pipeline.generate(encoded).tokens) + 1
    decode = best(args.runs, lambda: pipeline.generate(encoded))
    ours = best(args.runs, lambda: pipeline.transcribe(audio))

    reference = WhisperModel(str(folder), device="cpu", compute_type="float32", cpu_threads=args.threads)
    theirs = best(args.runs, lambda: list(reference.transcribe(audio, **GREEDY)[0]))

    print(f"{seconds:.1f} s of audio, best of {args.runs} runs; SpawnML providers {args.providers}")
    print(f"spawnml: load {load:.2f} s, encoder {encode:.2f} s per window, {tokens / decode:.1f} tokens/s")
    print("| runtime | transcription (s) | real-time factor |")
    print("|---|---|---|")
    for name, elapsed in (("spawnml", ours), (f"faster-whisper, cpu_threads={args.threads}", theirs)):
        print(f"| {name} | {elapsed:.2f} | {elapsed / seconds:.3f} |")


if __name__ == "__main__":
    main()
