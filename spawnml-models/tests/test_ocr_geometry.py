"""DBNet post-processing and line crops against rapidocr-onnxruntime's own, on synthetic maps and images.

rapidocr's ``DBPostProcess`` (the reference pipeline's) and the pipeline's ``boxes_from_map`` read
the same probability maps: the boxes must be equal to a pixel and the scores to float rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from spawnml_models.ocr.detection import DBSettings, boxes_from_map, detector_size
from spawnml_models.ocr.geometry import min_area_rect, order_box, unclip
from spawnml_models.ocr.pipeline import crop, reading_order

RNG = np.random.default_rng(0)


def blocks_map(height: int, width: int, blocks: list[tuple[int, int, int, int]]) -> np.ndarray:
    """A probability map with noisy text-like blocks (top, left, bottom, right) on a low background."""
    probability = RNG.uniform(0.0, 0.2, (height, width)).astype(np.float32)
    for top, left, bottom, right in blocks:
        probability[top:bottom, left:right] = RNG.uniform(0.6, 1.0, (bottom - top, right - left))
    return probability


def rapidocr_boxes(probability: np.ndarray, width: int, height: int, settings: DBSettings):
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DBPostProcess

    postprocess = DBPostProcess(
        thresh=settings.threshold,
        box_thresh=settings.box_threshold,
        max_candidates=settings.max_candidates,
        unclip_ratio=settings.unclip_ratio,
        use_dilation=True,
    )
    return postprocess(probability[None, None], (height, width))


MAPS = {
    "lines": (blocks_map(96, 160, [(10, 8, 22, 150), (40, 20, 52, 90), (70, 100, 76, 104)]), 320, 192),
    "tilted": (
        np.clip(np.rot90(blocks_map(120, 120, [(30, 10, 44, 110), (70, 30, 80, 90)]), 1) * 1.0, 0, 1).astype(
            np.float32
        ),
        240,
        240,
    ),
    "empty": (RNG.uniform(0.0, 0.2, (32, 32)).astype(np.float32), 32, 32),
}


@pytest.mark.parametrize("name", MAPS)
def test_boxes_from_map_match_rapidocr(name: str):
    probability, width, height = MAPS[name]
    settings = DBSettings()
    boxes, scores = boxes_from_map(probability, width, height, settings)
    expected_boxes, expected_scores = rapidocr_boxes(probability, width, height, settings)
    assert len(boxes) == len(expected_boxes)
    if boxes:
        np.testing.assert_allclose(np.stack(boxes), np.asarray(expected_boxes), atol=1.0)
        np.testing.assert_allclose(scores, expected_scores, rtol=1e-6)


def test_min_area_rect_recovers_a_rotated_rectangle():
    angle = 0.3
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    corners = np.array([[0, 0], [40, 0], [40, 10], [0, 10]], dtype=float) @ rotation.T + [100, 100]
    inside = corners.mean(axis=0) + RNG.uniform(-3, 3, (20, 2))
    box, short = min_area_rect(np.concatenate([corners, inside]))
    assert short == pytest.approx(10, abs=1e-3)
    np.testing.assert_allclose(box, order_box(corners), atol=1e-3)


def test_unclip_grows_each_side_by_area_over_perimeter():
    box = np.array([[0, 0], [30, 0], [30, 10], [0, 10]], dtype=float)
    distance = 1.6 * 300 / 80
    grown, short = min_area_rect(unclip(box, 1.6))
    assert short == pytest.approx(10 + 2 * distance, abs=1.0)
    np.testing.assert_allclose(grown[0], [-distance, -distance], atol=1.0)


def test_order_box_reads_top_left_first():
    box = order_box(np.array([[10, 5], [0, 5], [0, 0], [10, 0]], dtype=float))
    np.testing.assert_array_equal(box, [[0, 0], [10, 0], [10, 5], [0, 5]])


@pytest.mark.parametrize(
    "quad",
    [
        [[5, 3], [45, 6], [47, 30], [4, 28]],
        [[10, 2], [18, 2], [18, 40], [10, 40]],  # tall: turned upright
    ],
)
def test_crop_matches_rapidocr(quad):
    from rapidocr_onnxruntime import RapidOCR

    image = RNG.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    box = np.array(quad, dtype=np.float32)
    (expected,) = RapidOCR.get_crop_img_list(None, image, [box])  # an instance method that uses no state
    np.testing.assert_array_equal(crop(image, box), expected)


def test_detector_size_is_a_multiple_of_32_with_the_short_side_near_736():
    assert detector_size(260, 640) == (736, 1824)
    assert detector_size(1000, 2000) == (992, 1984)  # 62.5 rounds to even


def test_reading_order_puts_one_line_left_to_right():
    def box(x: float, y: float) -> np.ndarray:
        return np.array([[x, y], [x + 20, y], [x + 20, y + 10], [x, y + 10]], dtype=np.float32)

    ordered = reading_order(np.stack([box(100, 52), box(0, 50), box(10, 5), box(50, 45)]))
    assert [tuple(b[0]) for b in ordered] == [(10, 5), (0, 50), (50, 45), (100, 52)]
