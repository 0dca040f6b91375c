"""The PP-OCRv4 pipeline on SpawnML against rapidocr-onnxruntime's own pipeline on rendered images.

Both read the same PNG files: the strings must be equal and read back what was rendered,
every box corner within BOX_TOLERANCE pixels and every score within SCORE_TOLERANCE.
Latin text only: no installed font covers Chinese. Needs ``scripts/fetch-models pp-ocrv4``;
skips without the files unless ``SPAWNML_REQUIRE_MODELS=1``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from spawnml_models.assets import asset_file
from spawnml_models.ocr import OCRPipeline
from spawnml_models.ocr.pipeline import ASSET, CLASSIFIER, DETECTOR, RECOGNIZER

from tests.model_files import require

pytestmark = pytest.mark.real_model

#: Corners differ by a pixel where the two unclip the same region differently (exact offset of
#: the rectangle here, a rounded integer polygon in pyclipper); scores by crop resampling.
BOX_TOLERANCE = 2.0
SCORE_TOLERANCE = 0.05

PARAGRAPH = ["The quick brown fox jumps", "over the lazy dog 12345", "SpawnML reads text: OK!"]
WIDE_LINE = "A single wide line of text, read after letterboxing"


def paragraph() -> Image.Image:
    image = Image.new("RGB", (640, 260), "white")
    draw = ImageDraw.Draw(image)
    for i, text in enumerate(PARAGRAPH):
        draw.text((30 + 20 * i, 30 + 70 * i), text, fill="black", font=ImageFont.load_default(size=32))
    return image


def wide_line() -> Image.Image:
    image = Image.new("RGB", (900, 40), "white")
    ImageDraw.Draw(image).text((10, 4), WIDE_LINE, fill="black", font=ImageFont.load_default(size=24))
    return image


#: name -> (image, the lines it reads top to bottom)
IMAGES = {
    "paragraph": (paragraph(), PARAGRAPH),
    "upside-down-tilted": (paragraph().rotate(184, expand=True, fillcolor="white"), PARAGRAPH[::-1]),
    "wide": (wide_line(), [WIDE_LINE]),
}


@pytest.fixture(scope="module")
def pipeline() -> OCRPipeline:
    for name in (DETECTOR, CLASSIFIER, RECOGNIZER):
        require(lambda name=name: asset_file(ASSET, name))
    return OCRPipeline(providers=["cpu"])


@pytest.fixture(scope="module")
def reference():
    rapidocr = pytest.importorskip("rapidocr_onnxruntime")
    return rapidocr.RapidOCR()


@pytest.mark.parametrize("name", IMAGES)
def test_matches_rapidocr(name: str, pipeline: OCRPipeline, reference, tmp_path: Path):
    image, expected = IMAGES[name]
    path = tmp_path / f"{name}.png"
    image.save(path)
    lines = pipeline(path)
    result, _ = reference(str(path))
    boxes, texts, scores = zip(*result, strict=True)
    assert [line.text for line in lines] == list(texts) == expected
    np.testing.assert_allclose(np.stack([line.box for line in lines]), np.array(boxes), atol=BOX_TOLERANCE)
    np.testing.assert_allclose([line.score for line in lines], scores, atol=SCORE_TOLERANCE)
