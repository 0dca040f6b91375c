"""PP-OCR text recognition: line images to strings by CTC greedy decoding.

The recogniser's character list is the rec model's ``character`` metadata entry, one
character a line; index 0 is the CTC blank and the last index a space.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import spawnml
from spawnml import InvalidArgumentError

from .imaging import resize_bilinear

#: Height every line is scaled to, and the narrowest batch width (PP-OCRv4's ``rec_img_shape``).
LINE_HEIGHT, MIN_WIDTH = 48, 320
BATCH_SIZE = 6


def normalized_line(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """BGR ``image`` scaled to ``height`` keeping its aspect (at most ``width`` wide), mapped to
    [-1, 1] as (3, height, width) float32, zero-padded on the right."""
    resized_width = min(width, math.ceil(height * image.shape[1] / image.shape[0]))
    resized = resize_bilinear(image, height, resized_width).astype(np.float32)
    padded = np.zeros((3, height, width), dtype=np.float32)
    padded[:, :, :resized_width] = (resized / 255 - 0.5).transpose(2, 0, 1) / 0.5
    return padded


def by_aspect(images: Sequence[np.ndarray], batch_size: int) -> list[np.ndarray]:
    """Indices of ``images`` in batches of ``batch_size``, narrowest (width / height) first."""
    order = np.argsort([image.shape[1] / image.shape[0] for image in images], kind="stable")
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def ctc_greedy_decode(probabilities: np.ndarray, characters: Sequence[str]) -> list[tuple[str, float]]:
    """Best path through (batch, time, classes) ``probabilities``: repeats merged, blanks (0) dropped;
    each string with the mean probability of its characters (0 for an empty string)."""
    best = probabilities.argmax(axis=2)
    confidence = probabilities.max(axis=2)
    decoded = []
    for indices, scores in zip(best, confidence, strict=True):
        keep = np.append(True, indices[1:] != indices[:-1]) & (indices != 0)
        text = "".join(characters[index] for index in indices[keep])
        decoded.append((text, float(scores[keep].mean()) if keep.any() else 0.0))
    return decoded


class TextRecognizer:
    """Strings and confidences of single-line text images."""

    def __init__(self, model: str | Path, providers: list[str] | None = None) -> None:
        self.session = spawnml.InferenceSession(os.fspath(model), providers=providers)
        self.input_name = self.session.get_inputs()[0].name
        keys = self.session.graph.metadata.get("character")
        if not keys:
            raise InvalidArgumentError(f"recognition model {model} has no 'character' metadata entry")
        self.characters = ["", *keys.splitlines(), " "]

    def __call__(self, lines: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        """(text, score) for each BGR line image, in order."""
        results: list[tuple[str, float]] = [("", 0.0)] * len(lines)
        for batch in by_aspect(lines, BATCH_SIZE):
            ratio = max(MIN_WIDTH / LINE_HEIGHT, *(lines[i].shape[1] / lines[i].shape[0] for i in batch))
            width = int(LINE_HEIGHT * ratio)
            inputs = np.stack([normalized_line(lines[i], LINE_HEIGHT, width) for i in batch])
            probabilities = np.asarray(self.session.run(None, {self.input_name: inputs})[0])
            for i, result in zip(batch, ctc_greedy_decode(probabilities, self.characters), strict=True):
                results[i] = result
        return results
