"""PP-OCR text detection: DBNet's probability map turned into text boxes.

The image is scaled so that its shorter side is at least ``DBSettings.min_side`` (736 by
default) with both sides multiples of 32, normalised to [-1, 1]; the map is thresholded, dilated, split into
connected regions whose minimum-area rectangles are scored, grown ("unclipped") and
scaled back to image coordinates.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import spawnml

from .geometry import min_area_rect, order_box, polygon_mean, region_outlines, unclip
from .imaging import resize_bilinear
from .libraries import opencv

#: The shorter side the detector sees (PP-OCRv4's ``limit_side_len`` with ``limit_type: min``).
MIN_SIDE = 736


@dataclass(frozen=True)
class DBSettings:
    """DBNet settings: post-processing (pixel threshold, box score threshold, unclip ratio, smallest
    box side, most boxes) and the shorter side images are scaled up to (RapidOCR's ``det_limit_side_len``)."""

    threshold: float = 0.3
    box_threshold: float = 0.5
    unclip_ratio: float = 1.6
    min_size: float = 3.0
    max_candidates: int = 1000
    min_side: int = MIN_SIDE


class TextDetector:
    """Quadrilaterals (top-left, top-right, bottom-right, bottom-left) around lines of text."""

    def __init__(
        self, model: str | Path, providers: list[str] | None = None, settings: DBSettings = DBSettings()
    ) -> None:
        self.session = spawnml.InferenceSession(os.fspath(model), providers=providers)
        self.input_name = self.session.get_inputs()[0].name
        self.settings = settings

    def __call__(self, image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Boxes of the text in BGR ``image`` as an (n, 4, 2) float32 array of whole pixels,
        and each box's mean text probability."""
        height, width = image.shape[:2]
        outputs = self.session.run(None, {self.input_name: preprocess(image, self.settings.min_side)})
        probability = np.asarray(outputs[0])[0, 0]
        boxes, scores = boxes_from_map(probability, width, height, self.settings)
        boxes = [np.trunc(np.clip(order_box(box), 0, [width - 1, height - 1])) for box in boxes]
        kept = [i for i, box in enumerate(boxes) if min(_side_lengths(box)) > 3]
        return (
            np.array([boxes[i] for i in kept], dtype=np.float32).reshape(-1, 4, 2),
            np.array([scores[i] for i in kept], dtype=np.float32),
        )


def detector_size(height: int, width: int, min_side: int = MIN_SIDE) -> tuple[int, int]:
    """The multiple-of-32 size the detector runs at for an image of ``height`` x ``width``."""
    ratio = min_side / min(height, width) if min(height, width) < min_side else 1.0
    return (
        max(32, round(int(height * ratio) / 32) * 32),
        max(32, round(int(width * ratio) / 32) * 32),
    )


def preprocess(image: np.ndarray, min_side: int = MIN_SIDE) -> np.ndarray:
    """BGR ``image`` resized for the detector, scaled to [-1, 1], as a (1, 3, H, W) float32 batch."""
    height, width = image.shape[:2]
    resized = resize_bilinear(image, *detector_size(height, width, min_side))
    return ((resized.astype(np.float32) / 255 - 0.5) / 0.5).transpose(2, 0, 1)[None]


def boxes_from_map(
    probability: np.ndarray, width: int, height: int, settings: DBSettings = DBSettings()
) -> tuple[list[np.ndarray], list[float]]:
    """Text boxes in a ``width`` x ``height`` image from the detector's (H, W) probability map."""
    # A 2x2 dilation anchored at its centre: each pixel or its up-left neighbours.
    mask = opencv().dilate((probability > settings.threshold).astype(np.uint8), np.ones((2, 2), np.uint8))
    scale = np.array([width / probability.shape[1], height / probability.shape[0]])
    boxes, scores = [], []
    for region in region_outlines(mask)[: settings.max_candidates]:
        box, short_side = min_area_rect(region)
        if short_side < settings.min_size:
            continue
        score = polygon_mean(probability, box)
        if score < settings.box_threshold:
            continue
        box, short_side = min_area_rect(unclip(box, settings.unclip_ratio))
        if short_side < settings.min_size + 2:
            continue
        boxes.append(np.clip(np.round(box * scale), 0, [width, height]))
        scores.append(score)
    return boxes, scores


def _side_lengths(box: np.ndarray) -> tuple[int, int]:
    return int(np.linalg.norm(box[0] - box[1])), int(np.linalg.norm(box[0] - box[3]))
