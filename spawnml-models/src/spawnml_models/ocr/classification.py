"""PP-OCR text direction classification: is a line upside down?"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import spawnml

from .recognition import by_aspect, normalized_line

#: Input size of the PP-OCR v2 mobile classifier (``cls_image_shape``).
HEIGHT, WIDTH = 48, 192
BATCH_SIZE = 6
#: Lines are turned when the classifier says "180" with more than this confidence.
THRESHOLD = 0.9


class DirectionClassifier:
    """Turns upside-down line images the right way up."""

    def __init__(self, model: str | Path, providers: list[str] | None = None) -> None:
        self.session = spawnml.InferenceSession(os.fspath(model), providers=providers)
        self.input_name = self.session.get_inputs()[0].name

    def upside_down(self, lines: Sequence[np.ndarray]) -> np.ndarray:
        """Whether each BGR line image reads upside down, with more than ``THRESHOLD`` confidence."""
        flags = np.zeros(len(lines), dtype=bool)
        for batch in by_aspect(lines, BATCH_SIZE):
            inputs = np.stack([normalized_line(lines[i], HEIGHT, WIDTH) for i in batch])
            probabilities = np.asarray(self.session.run(None, {self.input_name: inputs})[0])
            flags[batch] = (probabilities.argmax(axis=1) == 1) & (probabilities.max(axis=1) > THRESHOLD)
        return flags

    def __call__(self, lines: Sequence[np.ndarray]) -> list[np.ndarray]:
        """``lines``, each turned 180 degrees where it reads upside down."""
        return [
            np.rot90(line, 2) if flip else line
            for line, flip in zip(lines, self.upside_down(lines), strict=True)
        ]
