"""OCR image operations: loading images, line normalisation, CTC decoding."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from spawnml import InvalidArgumentError
from spawnml_models.ocr.imaging import load_bgr, resize_bilinear
from spawnml_models.ocr.recognition import ctc_greedy_decode, normalized_line

RNG = np.random.default_rng(0)
IMAGE = RNG.integers(0, 256, (37, 53, 3), dtype=np.uint8)


def test_load_bgr_from_arrays_images_and_files(tmp_path):
    rgb = IMAGE[:, :, ::-1]
    Image.fromarray(rgb).save(tmp_path / "image.png")
    for source in (rgb, Image.fromarray(rgb), tmp_path / "image.png", str(tmp_path / "image.png")):
        np.testing.assert_array_equal(load_bgr(source), IMAGE)


def test_load_bgr_composites_transparency_on_white():
    rgba = np.zeros((2, 2, 4), dtype=np.uint8)
    np.testing.assert_array_equal(load_bgr(rgba), np.full((2, 2, 3), 255))


def test_load_bgr_refuses_float_arrays():
    with pytest.raises(InvalidArgumentError, match="uint8"):
        load_bgr(IMAGE.astype(np.float32))


def test_resize_refuses_empty_sizes():
    with pytest.raises(InvalidArgumentError, match="0x30"):
        resize_bilinear(IMAGE, 0, 30)


def test_normalized_line_keeps_aspect_and_pads_with_zeros():
    line = normalized_line(np.full((10, 20, 3), 255, dtype=np.uint8), 48, 192)
    assert line.shape == (3, 48, 192)
    assert (line[:, :, :96] == 1).all() and (line[:, :, 96:] == 0).all()


def test_ctc_greedy_decode_merges_repeats_and_drops_blanks():
    characters = ["", "a", "b", " "]
    path = [1, 1, 0, 1, 2, 2, 0, 3]
    probabilities = np.full((1, len(path), 4), 0.1, dtype=np.float32)
    probabilities[0, np.arange(len(path)), path] = [0.9, 0.7, 0.8, 0.6, 0.5, 0.9, 0.8, 0.4]
    ((text, score),) = ctc_greedy_decode(probabilities, characters)
    assert text == "aab " and score == pytest.approx((0.9 + 0.6 + 0.5 + 0.4) / 4)
    assert ctc_greedy_decode(np.eye(4, dtype=np.float32)[[0, 0]][None], characters) == [("", 0.0)]
