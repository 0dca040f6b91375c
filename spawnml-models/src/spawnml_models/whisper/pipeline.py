"""Speech recognition with Whisper: log-mel windows, encoder, greedy decoding with timestamps.

Long audio is read in 30 s windows as faster-whisper reads it with ``beam_size=1``,
``temperature=0``, ``condition_on_previous_text=False`` and no VAD: each window is decoded
from ``<|startoftranscript|>``; pairs of timestamps cut it into segments, and the next window
starts at the last closing timestamp, or after the window when the text ends on a lone one.
A window whose ``<|nospeech|>`` probability passes ``no_speech_threshold`` while its average
token log-probability is below ``log_prob_threshold`` is skipped as silence.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import cast

import numpy as np
import spawnml
from spawnml import ModelLoadError

from ..assets import asset_file
from ..audio_io import resample
from ..ctranslate2 import read_ctranslate2
from ..llm.cache import KVCache
from .audio import HOP_LENGTH, SAMPLE_RATE, WINDOW_FRAMES, fit_window, log_mel_spectrogram
from .decoding import TIME_PRECISION, SpecialTokens, TimestampRules, log_softmax
from .graph import ENCODER_OUTPUT, WhisperConfig, build_decoder_graph, build_encoder_graph, cross_names

MODEL_ASSET = "whisper-tiny-en"
MODEL_FILES = ("model.bin", "config.json", "tokenizer.json")
FRAME_SECONDS = HOP_LENGTH / SAMPLE_RATE
FRAMES_PER_TOKEN = 2  # the encoder's second convolution has stride 2
MULTILINGUAL_VOCAB = 51865  # English-only Whisper vocabularies have 51864 tokens


@dataclass(frozen=True)
class Segment:
    """A stretch of transcribed speech, in seconds from the start of the audio."""

    start: float
    end: float
    text: str
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class Decoded:
    """The greedy decoding of one window: its tokens (without the end of text) and scores."""

    tokens: list[int]
    avg_logprob: float
    no_speech_prob: float


class SpeechRecognitionPipeline:
    """Transcribe mono 16 kHz speech with a CTranslate2 Whisper model (Whisper tiny.en by default).

    ``model`` is a folder with CTranslate2's ``model.bin``, ``config.json`` and ``tokenizer.json``;
    the encoder and decoder run as SpawnML graphs on ``providers``.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        providers: Sequence[str] | None = None,
        no_speech_threshold: float = 0.6,
        log_prob_threshold: float = -1.0,
    ) -> None:
        folder = Path(model) if model is not None else asset_file(MODEL_ASSET, "model.bin").parent
        missing = [name for name in MODEL_FILES if not (folder / name).is_file()]
        if missing:
            raise ModelLoadError(
                f"{folder} is not a CTranslate2 Whisper folder: it has no {', '.join(missing)}"
            )
        weights = read_ctranslate2(folder / "model.bin")
        self.config = WhisperConfig.from_model(weights)
        if self.config.vocab >= MULTILINGUAL_VOCAB:
            raise ModelLoadError(
                f"{folder} holds a multilingual Whisper model ({self.config.vocab} tokens); this pipeline "
                "runs English-only models (no language or task tokens in its prompt)"
            )
        self.encoder = spawnml.InferenceSession(build_encoder_graph(weights), providers=providers)
        self.decoder = spawnml.InferenceSession(build_decoder_graph(weights), providers=providers)
        import tokenizers  # imported when the pipeline is made, not when it is registered

        self.tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokens = SpecialTokens.from_tokenizer(self.tokenizer, self.config.vocab)
        settings = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        lists = [settings.get(key) for key in ("suppress_ids", "suppress_ids_begin")]
        if not all(isinstance(ids, list) and all(isinstance(i, int) for i in ids) for ids in lists):
            raise ModelLoadError(
                f"{folder / 'config.json'} lacks integer lists suppress_ids and suppress_ids_begin"
            )
        self.rules = TimestampRules(self.tokens, tuple(lists[0]), tuple(lists[1]))
        self.no_speech_threshold = no_speech_threshold
        self.log_prob_threshold = log_prob_threshold

    def __call__(self, audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> list[Segment]:
        """The segments of mono ``audio`` (float32 samples at ``sample_rate`` Hz)."""
        return list(self.segments(audio, sample_rate))

    def transcribe(self, audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> str:
        """The text of ``audio``, its segments joined."""
        return "".join(segment.text for segment in self.segments(audio, sample_rate))

    def segments(self, audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> Iterator[Segment]:
        """The segments of ``audio`` as each 30 s window is decoded."""
        features = log_mel_spectrogram(resample(audio, sample_rate, SAMPLE_RATE))
        content = features.shape[1] - 1
        seek = 0
        while seek < content:
            size = min(WINDOW_FRAMES, content - seek)
            decoded = self.decode(fit_window(features[:, seek : seek + size]))
            if (
                decoded.no_speech_prob > self.no_speech_threshold
                and decoded.avg_logprob <= self.log_prob_threshold
            ):
                seek += size
                continue
            pieces, advance = self._split(decoded.tokens, seek * FRAME_SECONDS, size)
            seek += advance
            for start, end, tokens in pieces:
                text = self.tokenizer.decode([t for t in tokens if t < self.tokens.eot])
                if start != end and text.strip():
                    yield Segment(start, end, text, tuple(tokens))

    def encode(self, window: np.ndarray) -> dict[str, spawnml.Tensor]:
        """The encoder's outputs for one window of features ``[80, 3000]``, by name (device tensors)."""
        names = [ENCODER_OUTPUT, *(name for i in range(self.config.layers) for name in cross_names(i))]
        outputs = cast(
            "list[spawnml.Tensor]", self.encoder.run_with_tensors(names, {"features": window[None]})
        )
        return dict(zip(names, outputs, strict=True))

    def decode(self, window: np.ndarray) -> Decoded:
        """Greedy decoding of one window of features ``[80, 3000]`` from ``<|startoftranscript|>``."""
        return self.generate(self.encode(window))

    def generate(self, encoded: dict[str, spawnml.Tensor]) -> Decoded:
        """Greedy decoding from ``<|startoftranscript|>`` over a window's :meth:`encode` outputs."""
        cross = {name: value for name, value in encoded.items() if name != ENCODER_OUTPUT}
        cache = KVCache(self.config)
        generated: list[int] = []
        token, total_logprob, no_speech_prob = self.tokens.sot, 0.0, 0.0
        for step in range(self.config.context // 2):
            feeds = {
                "input_ids": np.array([[token]], np.int64),
                "position_ids": np.array([[cache.length]], np.int64),
                **cross,
                **cache.feeds(),
            }
            outputs = self.decoder.run_with_tensors(["logits", *cache.output_names], feeds)
            logits, *presents = cast("list[spawnml.Tensor]", outputs)
            cache.update(presents, 1)
            logits = np.asarray(logits.numpy())[0, -1]
            if step == 0:
                no_speech_prob = float(np.exp(log_softmax(logits)[self.tokens.no_speech]))
            masked = self.rules.apply(logits, generated)
            token = int(np.argmax(masked))
            total_logprob += float(log_softmax(masked)[token])
            if token == self.tokens.eot:
                break
            generated.append(token)
        return Decoded(generated, total_logprob / (len(generated) + 1), no_speech_prob)

    def _split(
        self, tokens: list[int], offset: float, size: int
    ) -> tuple[list[tuple[float, float, list[int]]], int]:
        """The ``(start, end, tokens)`` pieces of a window's tokens, and how many frames to move on."""
        begin = self.tokens.timestamp_begin

        def seconds(token: int) -> float:
            return offset + (token - begin) * TIME_PRECISION

        lone_ending = len(tokens) >= 2 and tokens[-2] < begin <= tokens[-1]
        cuts = [i for i in range(1, len(tokens)) if tokens[i] >= begin and tokens[i - 1] >= begin]
        if not cuts:
            times = [t for t in tokens if t >= begin]
            duration = size * FRAME_SECONDS
            if times and times[-1] != begin:
                duration = (times[-1] - begin) * TIME_PRECISION
            return [(offset, offset + duration, tokens)], size
        if lone_ending:
            cuts.append(len(tokens))
        bounds = [0, *cuts]
        pieces = [(seconds(tokens[a]), seconds(tokens[b - 1]), tokens[a:b]) for a, b in pairwise(bounds)]
        if lone_ending:
            return pieces, size
        return pieces, (tokens[cuts[-1] - 1] - begin) * FRAMES_PER_TOKEN
