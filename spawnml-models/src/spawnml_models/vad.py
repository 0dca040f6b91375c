"""Voice activity detection with Silero VAD: streamed speech probabilities, then speech segments.

The ONNX model scores one 512-sample chunk of 16 kHz audio at a time, preceded by the
last 64 samples of the chunk before, and carries an LSTM state from chunk to chunk, as
silero-vad's own ``OnnxWrapper`` runs it. The graph is bound to that stream at load (``sr``
a constant 16 kHz, ``input`` and ``state`` of fixed shapes), so the session keeps only the
branches of the model's ``If`` nodes that the stream takes and runs on providers without
control flow; the state stays on the device between chunks. :func:`speech_segments` turns the
probabilities into segments by the rules of ``silero_vad.get_speech_timestamps``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import spawnml
from spawnml import InvalidArgumentError
from spawnml.cli import Command
from spawnml.ir import Graph, Value

from .assets import asset_file
from .audio_io import FILE_HELP, read_audio, resample

MODEL_ASSET = "silero-vad"
MODEL_FILE = "silero_vad.onnx"
SAMPLE_RATE = 16_000
CHUNK = 512
CONTEXT = 64
STATE_SHAPE = (2, 1, 128)


@dataclass(frozen=True)
class SpeechSegment:
    """One stretch of speech, in samples at :data:`SAMPLE_RATE` (end exclusive)."""

    start: int
    end: int

    @property
    def start_seconds(self) -> float:
        return self.start / SAMPLE_RATE

    @property
    def end_seconds(self) -> float:
        return self.end / SAMPLE_RATE


@dataclass(frozen=True)
class SegmentationParameters:
    """silero-vad's segmentation settings, with its defaults.

    A chunk is speech from ``threshold`` up; speech ends after ``min_silence_duration_ms``
    below ``neg_threshold`` (``threshold - 0.15`` by default, at least 0.01). Shorter speech
    than ``min_speech_duration_ms`` is dropped and each segment is padded by ``speech_pad_ms``.
    """

    threshold: float = 0.5
    min_speech_duration_ms: int = 250
    min_silence_duration_ms: int = 100
    speech_pad_ms: int = 30
    neg_threshold: float | None = None

    @property
    def exit_threshold(self) -> float:
        return max(self.threshold - 0.15, 0.01) if self.neg_threshold is None else self.neg_threshold


class VADPipeline:
    """Silero VAD v6 over mono 16 kHz audio: per-chunk speech probabilities and speech segments.

    ``model`` is a Silero VAD ONNX file (the main model or its If-less opset 18 export);
    it defaults to the cached ``silero_vad.onnx`` of silero-vad 6.2.3.
    """

    def __init__(self, model: str | Path | None = None, providers: Sequence[str] | None = None) -> None:
        model = model if model is not None else asset_file(MODEL_ASSET, MODEL_FILE)
        graph = streaming_graph(spawnml.load(os.fspath(model)), model)
        self.session = spawnml.InferenceSession(graph, providers=providers)

    def __call__(
        self,
        audio: np.ndarray,
        parameters: SegmentationParameters | None = None,
        sample_rate: int = SAMPLE_RATE,
    ) -> list[SpeechSegment]:
        """The speech segments of mono ``audio`` (float samples in [-1, 1] at ``sample_rate`` Hz),
        in samples at 16 kHz."""
        audio = resample(audio, sample_rate, SAMPLE_RATE)
        return speech_segments(self.probabilities(audio), len(audio), parameters or SegmentationParameters())

    def probabilities(self, audio: np.ndarray) -> np.ndarray:
        """The speech probability of each 512-sample chunk; the last is zero-padded."""
        return np.array(list(self.stream(audio)), dtype=np.float32)

    def stream(self, audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> Iterator[float]:
        """Speech probabilities chunk by chunk of 16 kHz audio, the LSTM state and the 64-sample
        context carried."""
        audio = resample(audio, sample_rate, SAMPLE_RATE)
        padded = np.zeros(-(-len(audio) // CHUNK) * CHUNK, dtype=np.float32)
        padded[: len(audio)] = audio
        state: np.ndarray | spawnml.Tensor = np.zeros(STATE_SHAPE, dtype=np.float32)
        context = np.zeros((1, CONTEXT), dtype=np.float32)
        for chunk in padded.reshape(-1, 1, CHUNK):
            feeds = {"input": np.concatenate([context, chunk], axis=1), "state": state}
            probability, state = cast("list[spawnml.Tensor]", self.session.run_with_tensors(None, feeds))
            context = chunk[:, -CONTEXT:]
            yield float(probability.numpy().reshape(-1)[0])


def streaming_graph(graph: Graph, model: str | Path) -> Graph:
    """``graph`` as :meth:`VADPipeline.stream` runs it: ``sr`` the constant :data:`SAMPLE_RATE`,
    ``input`` one chunk after its context and ``state`` one stream's."""
    names = sorted(value.name for value in graph.inputs)
    if names != ["input", "sr", "state"]:
        raise InvalidArgumentError(
            f"{model} is not a Silero VAD model: its inputs are {names}, not ['input', 'sr', 'state']"
        )
    shapes = {"input": (1, CONTEXT + CHUNK), "state": STATE_SHAPE}
    graph.inputs = [
        Value(value.name, np.dtype(np.float32), shapes[value.name])
        for value in graph.inputs
        if value.name in shapes
    ]
    graph.initializers["sr"] = np.array(SAMPLE_RATE, dtype=np.int64)
    return graph


def speech_segments(
    probabilities: Sequence[float] | np.ndarray, num_samples: int, parameters: SegmentationParameters
) -> list[SpeechSegment]:
    """Segments from per-chunk speech probabilities, as ``silero_vad.get_speech_timestamps``."""
    rate = SAMPLE_RATE / 1000
    min_speech, min_silence = (
        rate * parameters.min_speech_duration_ms,
        rate * parameters.min_silence_duration_ms,
    )
    exit_threshold = parameters.exit_threshold
    spans: list[list[int]] = []
    start: int | None = None
    silence_start = 0
    for index, probability in enumerate(probabilities):
        sample = index * CHUNK
        if probability >= parameters.threshold:
            silence_start = 0
            if start is None:
                start = sample
                continue
        if start is not None and probability < exit_threshold:
            silence_start = silence_start or sample
            if sample - silence_start >= min_silence:
                if silence_start - start > min_speech:
                    spans.append([start, silence_start])
                start, silence_start = None, 0
    if start is not None and num_samples - start > min_speech:
        spans.append([start, num_samples])
    return _pad(spans, num_samples, int(rate * parameters.speech_pad_ms))


def _pad(spans: list[list[int]], num_samples: int, pad: int) -> list[SpeechSegment]:
    """Widen each span by ``pad`` samples, splitting a shorter gap between neighbours evenly."""
    for index, span in enumerate(spans):
        if index == 0:
            span[0] = max(0, span[0] - pad)
        if index + 1 < len(spans):
            following = spans[index + 1]
            gap = following[0] - span[1]
            widen = gap // 2 if gap < 2 * pad else pad
            span[1] += widen
            following[0] = max(0, following[0] - widen)
        else:
            span[1] = min(num_samples, span[1] + pad)
    return [SpeechSegment(start, end) for start, end in spans]


def configure_vad(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spawnml vad``."""
    defaults = SegmentationParameters()
    parser.add_argument("audio", metavar="AUDIO", help=FILE_HELP)
    parser.add_argument("--threshold", type=float, default=defaults.threshold)
    parser.add_argument("--min-speech-ms", type=int, default=defaults.min_speech_duration_ms)
    parser.add_argument("--min-silence-ms", type=int, default=defaults.min_silence_duration_ms)
    parser.add_argument("--speech-pad-ms", type=int, default=defaults.speech_pad_ms)
    parser.add_argument(
        "--providers",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        help="comma-separated providers in order of preference, e.g. webgpu,cpu",
    )


def run_vad(args: argparse.Namespace) -> int:
    """Print the speech segments of ``args.audio``, in samples and seconds; timings go to stderr."""
    audio = read_audio(args.audio, SAMPLE_RATE)
    parameters = SegmentationParameters(
        args.threshold, args.min_speech_ms, args.min_silence_ms, args.speech_pad_ms
    )
    start = time.perf_counter()
    segments = VADPipeline(providers=args.providers)(audio, parameters)
    print(
        f"{len(audio) / SAMPLE_RATE:.2f} s of audio in {time.perf_counter() - start:.2f} s", file=sys.stderr
    )
    print(f"{'start':>9} {'end':>9} {'start_s':>9} {'end_s':>9}")
    for segment in segments:
        print(
            f"{segment.start:>9} {segment.end:>9} {segment.start_seconds:>9.3f} {segment.end_seconds:>9.3f}"
        )
    return 0


VAD = Command(
    name="vad",
    help="find the speech in an audio file with Silero VAD",
    configure=configure_vad,
    run=run_vad,
)
