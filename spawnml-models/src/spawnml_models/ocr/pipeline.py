"""OCR with PP-OCRv4: detect text lines, straighten each, turn it upright, read it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..assets import asset_file
from .classification import DirectionClassifier
from .detection import DBSettings, TextDetector
from .imaging import ImageInput, load_bgr, resize_bilinear, warp_quad
from .recognition import TextRecognizer

ASSET = "pp-ocrv4"
DETECTOR, RECOGNIZER, CLASSIFIER = (
    "ch_PP-OCRv4_det_infer.onnx",
    "ch_PP-OCRv4_rec_infer.onnx",
    "ch_ppocr_mobile_v2.0_cls_infer.onnx",
)
#: Images are scaled into [MIN_SIDE, MAX_SIDE] before detection.
MIN_SIDE, MAX_SIDE = 30, 2000
#: Images this low, or wider than this many heights, get black bands above and below.
MIN_HEIGHT, MAX_ASPECT = 30, 8
#: Boxes whose top-left corners are closer than this vertically are on one line.
LINE_TOLERANCE = 10


@dataclass(frozen=True, eq=False)
class TextLine:
    """One line of text: its box in image pixels (top-left, top-right, bottom-right, bottom-left),
    the string read there and the recogniser's mean character confidence."""

    box: np.ndarray
    text: str
    score: float


class OCRPipeline:
    """Text lines of an image, as RapidOCR's PP-OCRv4 pipeline finds and reads them.

    The three ONNX models default to the cached ``pp-ocrv4`` asset; ``providers`` orders
    the backends that run them. Lines scoring below ``text_score`` are dropped; ``detection``
    sets the detector's post-processing and the shorter side images are scaled up to.
    """

    def __init__(
        self,
        detector: str | Path | None = None,
        classifier: str | Path | None = None,
        recognizer: str | Path | None = None,
        providers: Sequence[str] | None = None,
        text_score: float = 0.5,
        detection: DBSettings | None = None,
    ) -> None:
        providers = list(providers) if providers is not None else None
        self.detector = TextDetector(
            detector or asset_file(ASSET, DETECTOR), providers, detection or DBSettings()
        )
        self.classifier = DirectionClassifier(classifier or asset_file(ASSET, CLASSIFIER), providers)
        self.recognizer = TextRecognizer(recognizer or asset_file(ASSET, RECOGNIZER), providers)
        self.text_score = text_score

    def __call__(self, image: ImageInput) -> list[TextLine]:
        """The lines read in ``image`` (a path, Pillow image or RGB array), top to bottom, left to right."""
        original = load_bgr(image)
        scaled, scale = fit_size(original)
        padded, top = letterbox(scaled)
        boxes, _ = self.detector(padded)
        boxes = reading_order(boxes)
        lines = self.classifier([crop(padded, box) for box in boxes])
        results = self.recognizer(lines)
        height, width = original.shape[:2]
        return [
            TextLine(np.clip((box - [0, top]) * scale, 0, [width, height]).astype(np.float32), text, score)
            for box, (text, score) in zip(boxes, results, strict=True)
            if score >= self.text_score
        ]


def fit_size(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``image`` scaled (to multiples of 32) when a side is outside [MIN_SIDE, MAX_SIDE], and the
    (x, y) factors that map its pixels back to the original."""
    height, width = image.shape[:2]
    if max(height, width) > MAX_SIDE:
        ratio = MAX_SIDE / max(height, width)
    elif min(height, width) < MIN_SIDE:
        ratio = MIN_SIDE / min(height, width)
    else:
        return image, np.ones(2)
    new_height, new_width = (max(32, round(int(side * ratio) / 32) * 32) for side in (height, width))
    return resize_bilinear(image, new_height, new_width), np.array([width / new_width, height / new_height])


def letterbox(image: np.ndarray) -> tuple[np.ndarray, int]:
    """``image`` with equal black bands above and below when it is very low or very wide, and the
    band height."""
    height, width = image.shape[:2]
    if height > MIN_HEIGHT and width / height <= MAX_ASPECT:
        return image, 0
    band = abs(max(int(width / MAX_ASPECT), MIN_HEIGHT) * 2 - height) // 2
    return np.pad(image, ((band, band), (0, 0), (0, 0))), band


def reading_order(boxes: np.ndarray) -> np.ndarray:
    """``boxes`` top to bottom by their top-left corner; boxes whose corners are within
    LINE_TOLERANCE of the previous one's height are put left to right."""
    ordered = [boxes[i] for i in np.lexsort((boxes[:, 0, 0], boxes[:, 0, 1]))]
    for i in range(1, len(ordered)):
        j = i
        while (
            j > 0
            and abs(ordered[j][0, 1] - ordered[j - 1][0, 1]) < LINE_TOLERANCE
            and ordered[j][0, 0] < ordered[j - 1][0, 0]
        ):
            ordered[j - 1], ordered[j] = ordered[j], ordered[j - 1]
            j -= 1
    return np.array(ordered, dtype=np.float32).reshape(-1, 4, 2)


def crop(image: np.ndarray, box: np.ndarray) -> np.ndarray:
    """The region of ``image`` inside ``box``, straightened; turned upright (90 degrees
    anticlockwise) when it is at least 1.5 times taller than wide."""
    width = int(max(np.linalg.norm(box[0] - box[1]), np.linalg.norm(box[2] - box[3])))
    height = int(max(np.linalg.norm(box[0] - box[3]), np.linalg.norm(box[1] - box[2])))
    straightened = warp_quad(image, box, width, height)
    return np.rot90(straightened) if height >= 1.5 * width else straightened
