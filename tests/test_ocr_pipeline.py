"""The PP-OCRv4 pipeline on SpawnML against rapidocr-onnxruntime's own pipeline on rendered images.

Both read the same PNG files: the strings must be equal and read back what was rendered,
every box corner within BOX_TOLERANCE pixels and every score within SCORE_TOLERANCE.
Latin text only: no installed font covers Chinese. On WebGPU the three networks run whole on the
GPU over one small image at a reduced detector side (RapidOCR's ``det_limit_side_len``, set alike
on both sides): a software Vulkan device takes about a minute for the default 736 px.
Needs ``scripts/fetch-models pp-ocrv4``; skips without the files unless ``SPAWNML_REQUIRE_MODELS=1``.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from spawnml_models.assets import asset_file
from spawnml_models.ocr import OCRPipeline
from spawnml_models.ocr.detection import DBSettings
from spawnml_models.ocr.pipeline import ASSET, CLASSIFIER, DETECTOR, RECOGNIZER

from tests.backends import backend_or_skip
from tests.model_files import require

pytestmark = pytest.mark.real_model

#: Both post-process with OpenCV and pyclipper: boxes are equal unless a probability, moved by
#: float32 sums in another order (~1e-5), crosses the threshold and moves a corner by a pixel;
#: scores differ by those sums (3e-5 at most, measured).
BOX_TOLERANCE = 1.0
SCORE_TOLERANCE = 1e-3
#: The GPU against the CPU backend on the same pixels: float32 sums in another order move the
#: probability maps by ~1e-5, so boxes are equal and scores agree far below SCORE_TOLERANCE.
GPU_SCORE_TOLERANCE = 1e-3
#: Two lines at the detector side they are drawn for: no scaling, a 128 x 352 probability map.
SMALL_LINES, SMALL_SIDE = ["Read on the GPU", "lavapipe 2026"], 128

PARAGRAPH = ["The quick brown fox jumps", "over the lazy dog 12345", "SpawnML reads text: OK!"]
WIDE_LINE = "A single wide line of text, read after letterboxing"
INVOICE = ["Hello SpawnML 2026", "Invoice total: $1,234.56"]


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


def invoice() -> Image.Image:
    image = Image.new("RGB", (520, 130), "white")
    draw = ImageDraw.Draw(image)
    for i, text in enumerate(INVOICE):
        draw.text((20, 20 + 50 * i), text, fill="black", font=ImageFont.load_default(size=30))
    return image


def small_lines() -> Image.Image:
    image = Image.new("RGB", (352, SMALL_SIDE), "white")
    draw = ImageDraw.Draw(image)
    for i, text in enumerate(SMALL_LINES):
        draw.text((14, 16 + 54 * i), text, fill="black", font=ImageFont.load_default(size=30))
    return image


#: name -> (image, the lines it reads top to bottom)
IMAGES = {
    "paragraph": (paragraph(), PARAGRAPH),
    "upside-down-tilted": (paragraph().rotate(184, expand=True, fillcolor="white"), PARAGRAPH[::-1]),
    "wide": (wide_line(), [WIDE_LINE]),
    "invoice": (invoice(), INVOICE),
}


@pytest.fixture(scope="module")
def pipeline() -> OCRPipeline:
    for name in (DETECTOR, CLASSIFIER, RECOGNIZER):
        require(lambda name=name: asset_file(ASSET, name))
    return OCRPipeline(providers=["cpu"])


@pytest.fixture(scope="module")
def reference():
    import rapidocr_onnxruntime

    return rapidocr_onnxruntime.RapidOCR()


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


def test_whole_pipeline_on_webgpu_matches_rapidocr_and_the_cpu(tmp_path: Path):
    """Detection, direction and recognition all placed on WebGPU (no CPU node) read what RapidOCR
    reads, within the CPU pipeline's tolerances, and what the CPU backend reads, box for box."""
    backend_or_skip("webgpu")
    import rapidocr_onnxruntime as rapidocr

    for name in (DETECTOR, CLASSIFIER, RECOGNIZER):
        require(lambda name=name: asset_file(ASSET, name))
    path = tmp_path / "small.png"
    small_lines().save(path)
    detection = DBSettings(min_side=SMALL_SIDE)
    gpu = OCRPipeline(providers=["webgpu"], detection=detection)
    for model in (gpu.detector, gpu.classifier, gpu.recognizer):
        placed = collections.Counter(provider for _, _, provider in model.session.placement())
        assert set(placed) == {"webgpu"}, placed
    lines = gpu(path)
    result, _ = rapidocr.RapidOCR(det_limit_side_len=SMALL_SIDE)(str(path))
    boxes, texts, scores = zip(*result, strict=True)
    assert [line.text for line in lines] == list(texts) == SMALL_LINES
    np.testing.assert_allclose(np.stack([line.box for line in lines]), np.array(boxes), atol=BOX_TOLERANCE)
    np.testing.assert_allclose([line.score for line in lines], scores, atol=SCORE_TOLERANCE)
    cpu = OCRPipeline(providers=["cpu"], detection=detection)(path)
    assert [line.text for line in lines] == [line.text for line in cpu]
    np.testing.assert_array_equal(
        np.stack([line.box for line in lines]), np.stack([line.box for line in cpu])
    )
    np.testing.assert_allclose(
        [line.score for line in lines], [line.score for line in cpu], rtol=0, atol=GPU_SCORE_TOLERANCE
    )
