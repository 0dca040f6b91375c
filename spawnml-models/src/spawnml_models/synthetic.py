"""Deterministic synthetic inputs for real models: text-like images, speech-like audio, token batches.

Every generator draws from the ``numpy.random.Generator`` it is given, so the same seed
gives the same input on every machine and for every runtime being compared.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Ids of BERT's WordPiece vocabulary: padding, [CLS], [SEP], first ordinary word piece, size.
PAD, CLS, SEP, FIRST_WORD, BERT_VOCAB = 0, 101, 102, 1996, 30522


def text_image(rng: np.random.Generator, height: int, width: int, lines: int = 1) -> np.ndarray:
    """An RGB page ``(height, width, 3)`` in [0, 1]: rows of dark stroke glyphs on light paper."""
    rows, cols = np.mgrid[0:height, 0:width].astype(np.float32)
    slope = rng.uniform(-0.1, 0.1, 2) / max(height, width)
    paper = rng.uniform(0.8, 0.95) + slope[0] * rows + slope[1] * cols
    paper = paper[..., None] + rng.uniform(-0.03, 0.03, 3) + rng.normal(0, 0.02, (height, width, 3))
    ink = np.zeros((height, width), dtype=np.float32)
    pitch = height / lines
    for line in range(lines):
        size = pitch * rng.uniform(0.55, 0.8)
        top = line * pitch + (pitch - size) / 2
        left = rng.uniform(0.02, 0.2) * width
        while left + 0.6 * size < width:
            _glyph(ink, rng, top, left, size)
            left += size * (rng.uniform(0.65, 0.8) + (rng.random() < 0.15) * 0.5)  # sometimes a space
    colour = rng.uniform(0.0, 0.25, 3)
    page = paper * (1 - ink[..., None]) + colour * ink[..., None]
    return np.clip(page, 0, 1).astype(np.float32)


def _glyph(ink: np.ndarray, rng: np.random.Generator, top: float, left: float, size: float) -> None:
    """Two to four strokes between points of a 3x3 grid in a ``0.6 size`` by ``size`` box."""
    grid = np.stack(np.meshgrid(np.linspace(0, size, 3), np.linspace(0, 0.6 * size, 3)), -1).reshape(-1, 2)
    origin = np.array([top, left])
    for _ in range(rng.integers(2, 5)):
        start, end = rng.choice(len(grid), 2, replace=False)
        _stroke(ink, origin + grid[start], origin + grid[end], max(size / 14, 0.7))


def _stroke(ink: np.ndarray, start: np.ndarray, end: np.ndarray, radius: float) -> None:
    """Paint an anti-aliased segment (row, column endpoints) of half-width ``radius`` into ``ink``."""
    low = np.maximum(np.floor(np.minimum(start, end) - radius - 1), 0).astype(int)
    high = np.minimum(np.ceil(np.maximum(start, end) + radius + 2), ink.shape).astype(int)
    if np.any(high <= low):
        return
    rows, cols = np.mgrid[low[0] : high[0], low[1] : high[1]].astype(np.float32)
    points = np.stack([rows + 0.5, cols + 0.5], -1) - start
    direction = end - start
    along = np.clip(points @ direction / max(direction @ direction, 1e-9), 0, 1)
    distance = np.linalg.norm(points - along[..., None] * direction, axis=-1)
    cover = np.clip(radius + 0.5 - distance, 0, 1)
    window = ink[low[0] : high[0], low[1] : high[1]]
    np.maximum(window, cover, out=window)


def speech(rng: np.random.Generator, samples: int, rate: int = 16_000) -> np.ndarray:
    """Speech-like float32 audio: voiced syllables with a gliding pitch, pauses and breath noise.

    Harmonics of a 90-220 Hz fundamental are weighted by two formant bumps, shaped by a
    syllable envelope near 4 Hz, and gated off for some syllables, leaving silences.
    """
    time = np.arange(samples) / rate
    base = rng.uniform(90, 220)
    pitch = base * (1 + 0.12 * np.sin(2 * np.pi * rng.uniform(0.5, 2) * time + rng.uniform(0, 2 * np.pi)))
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    formants = rng.uniform([500, 1100], [900, 2200])
    voiced = np.zeros(samples)
    for harmonic in range(1, int(4000 // base) + 1):
        weight = (1 + 4 * np.exp(-(((harmonic * base - formants) / 250) ** 2)).sum()) / harmonic
        voiced += weight * np.sin(harmonic * phase + rng.uniform(0, 2 * np.pi))
    syllable_rate = rng.uniform(3, 5)
    envelope = np.sin(np.pi * syllable_rate * time) ** 2
    spoken = rng.random(int(syllable_rate * samples / rate) + 1) < 0.7
    envelope *= spoken[(syllable_rate * time).astype(int)]
    audio = voiced * envelope
    audio *= 0.5 / max(np.abs(audio).max(), 1e-9)
    return (audio + rng.normal(0, 0.003, samples)).astype(np.float32)


def token_batch(rng: np.random.Generator, lengths: Sequence[int]) -> dict[str, np.ndarray]:
    """BERT feeds for sentences of ``lengths`` tokens ([CLS] words [SEP]), right-padded to the longest."""
    ids = np.full((len(lengths), max(lengths)), PAD, dtype=np.int64)
    for row, length in enumerate(lengths):
        ids[row, :length] = [CLS, *rng.integers(FIRST_WORD, BERT_VOCAB, length - 2), SEP]
    mask = (np.arange(ids.shape[1]) < np.array(lengths)[:, None]).astype(np.int64)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
