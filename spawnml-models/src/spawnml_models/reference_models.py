"""Real models every backend must run like onnxruntime, each with the inputs that drive it.

A driver takes a session (SpawnML's or onnxruntime's: they share the API), runs it over
several deterministic inputs of varying shape and returns every output in order. Tolerances
are those of float32 arithmetic run in a different summation order through the whole
network, stated per model with the magnitude of its outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np
from spawnml.models import ReferenceModel

from .assets import asset_file
from .embeddings import MODEL_ASSET as MINILM_ASSET
from .synthetic import speech, text_image, token_batch

OCR_ASSET = "pp-ocrv4"
VAD_ASSET = "silero-vad"

Feeds = dict[str, np.ndarray]
Driver = Callable[[Any], list[np.ndarray]]

#: Sentence lengths in tokens, one tuple per batch: rows are right-padded to the longest.
MINILM_BATCHES = ((7,), (16, 9), (40, 33, 12, 5), (128, 64, 100))
#: (batch, height, width) of pages for the detector; DBNet needs multiples of 32.
DETECTOR_PAGES = ((1, 96, 160), (2, 128, 128), (1, 224, 320))
#: (batch, width) of 48-pixel text lines for the recogniser, which takes any width.
RECOGNISER_LINES = ((1, 80), (3, 160), (2, 320))
#: Batches of 48x192 text lines for the direction classifier; odd rows are upside down.
CLASSIFIER_BATCHES = (1, 4)
#: (batch, chunks) of each audio stream for the voice activity detector.
VAD_STREAMS = ((1, 8), (2, 4))
VAD_RATE, VAD_CHUNK, VAD_CONTEXT = 16_000, 512, 64

#: Per-channel normalisation of PaddleOCR's detector (ImageNet statistics).
DETECTOR_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
DETECTOR_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def run_each(feeds: Callable[[], Iterator[Feeds]]) -> Driver:
    """A driver running a session once per feed dict that ``feeds()`` yields."""

    def drive(session: Any) -> list[np.ndarray]:
        return [output for feed in feeds() for output in session.run(None, feed)]

    return drive


def minilm_feeds() -> Iterator[Feeds]:
    """Batches of 1 to 4 sentences of 5 to 128 tokens, padded, so both axes vary."""
    rng = np.random.default_rng(2024)
    for lengths in MINILM_BATCHES:
        yield token_batch(rng, lengths)


def detector_feeds() -> Iterator[Feeds]:
    """Pages of two to five text lines, normalised as PaddleOCR's detector expects."""
    rng = np.random.default_rng(11)
    for batch, height, width in DETECTOR_PAGES:
        pages = [text_image(rng, height, width, lines=int(rng.integers(2, 6))) for _ in range(batch)]
        yield {"x": nchw((np.stack(pages) - DETECTOR_MEAN) / DETECTOR_STD)}


def recogniser_feeds() -> Iterator[Feeds]:
    """Single text lines 48 pixels high, scaled to [-1, 1]."""
    rng = np.random.default_rng(12)
    for batch, width in RECOGNISER_LINES:
        yield {"x": nchw(np.stack([text_image(rng, 48, width) for _ in range(batch)]) * 2 - 1)}


def classifier_feeds() -> Iterator[Feeds]:
    """48x192 text lines scaled to [-1, 1], every second one rotated by 180 degrees."""
    rng = np.random.default_rng(13)
    for batch in CLASSIFIER_BATCHES:
        lines = [np.rot90(text_image(rng, 48, 192), 2 * (row % 2)) for row in range(batch)]
        yield {"x": nchw(np.stack(lines) * 2 - 1)}


def nchw(images: np.ndarray) -> np.ndarray:
    """``(batch, height, width, channels)`` images as a contiguous float32 NCHW batch."""
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2), dtype=np.float32)


def drive_vad(session: Any) -> list[np.ndarray]:
    """Stream speech-like audio in 512-sample chunks at 16 kHz, feeding ``stateN`` back as ``state``.

    As silero-vad's own wrapper does, each chunk is preceded by the last 64 samples of the
    one before (zeros at the start). Returns the speech probability and state of every chunk.
    """
    rng = np.random.default_rng(16)
    rate = np.array(VAD_RATE, dtype=np.int64)
    outputs = []
    for batch, chunks in VAD_STREAMS:
        audio = np.stack([speech(rng, chunks * VAD_CHUNK, VAD_RATE) for _ in range(batch)])
        state = np.zeros((2, batch, 128), dtype=np.float32)
        context = np.zeros((batch, VAD_CONTEXT), dtype=np.float32)
        for chunk in np.split(audio, chunks, axis=1):
            feeds = {"input": np.concatenate([context, chunk], axis=1), "state": state, "sr": rate}
            probability, state = session.run(None, feeds)
            outputs += [probability, state]
            context = chunk[:, -VAD_CONTEXT:]
    return outputs


REFERENCE_MODELS = (
    ReferenceModel(
        name="minilm-l6-v2-int8",
        path=partial(asset_file, MINILM_ASSET, "model.onnx"),
        drive=run_each(minilm_feeds),
        rtol=1e-4,
        atol=1e-4,  # hidden states up to about 6 after six float32 transformer layers
        description="all-MiniLM-L6-v2 encoder, int8 weights: last hidden state, batches of 1-4, 7-128 tokens",
    ),
    ReferenceModel(
        name="pp-ocrv4-det",
        path=partial(asset_file, OCR_ASSET, "ch_PP-OCRv4_det_infer.onnx"),
        drive=run_each(detector_feeds),
        rtol=1e-4,
        atol=1e-4,  # text probabilities in [0, 1] after sixty convolutions: 4.4e-5 measured with cuBLAS
        description="PP-OCRv4 DBNet text detector: probability maps of text pages, 96x160 to 224x320",
    ),
    ReferenceModel(
        name="pp-ocrv4-rec",
        path=partial(asset_file, OCR_ASSET, "ch_PP-OCRv4_rec_infer.onnx"),
        drive=run_each(recogniser_feeds),
        rtol=1e-4,
        atol=1e-5,  # per-step softmax over 6625 characters
        description="PP-OCRv4 SVTR text recogniser: character probabilities of 48-pixel lines, 80-320 wide",
    ),
    ReferenceModel(
        name="pp-ocr-mobile-v2-cls",
        path=partial(asset_file, OCR_ASSET, "ch_ppocr_mobile_v2.0_cls_infer.onnx"),
        drive=run_each(classifier_feeds),
        rtol=1e-4,
        atol=1e-5,  # softmax over two directions
        description="PP-OCR mobile v2 text direction classifier: upright or upside-down 48x192 lines",
    ),
    ReferenceModel(
        name="silero-vad",
        path=partial(asset_file, VAD_ASSET, "silero_vad.onnx"),
        drive=drive_vad,
        rtol=1e-4,
        atol=1e-5,  # speech probability in [0, 1] and LSTM state bounded by tanh
        description="Silero VAD v6 (If by sample rate, LSTM): streamed 512-sample chunks, state fed back",
    ),
    ReferenceModel(
        name="silero-vad-ifless",
        path=partial(asset_file, VAD_ASSET, "silero_vad_op18_ifless.onnx"),
        drive=drive_vad,
        rtol=1e-4,
        atol=1e-5,  # speech probability in [0, 1] and LSTM state bounded by tanh
        description="Silero VAD v6, opset 18 export: one If, the LSTM cell as Gemm, Sigmoid and Tanh",
    ),
)
