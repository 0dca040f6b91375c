"""OCR geometry and DBNet post-processing on hand-made masks and maps, without model files."""

from __future__ import annotations

import numpy as np
import pytest
from spawnml_models.ocr.detection import box_score, boxes_from_map, detector_size
from spawnml_models.ocr.geometry import (
    connected_regions,
    convex_hull,
    convex_polygon_mask,
    expand_rect,
    min_area_rect,
    order_box,
)
from spawnml_models.ocr.pipeline import reading_order


def test_connected_regions_join_diagonal_neighbours_only():
    mask = np.zeros((6, 8), dtype=bool)
    mask[0, 0] = mask[1, 1] = True  # diagonal: one region
    mask[4:6, 3:7] = True  # a block
    mask[0, 7] = True  # alone
    regions = connected_regions(mask)
    bounds = sorted((tuple(r.min(axis=0)), tuple(r.max(axis=0))) for r in regions)
    assert bounds == [((0, 0), (1, 1)), ((3, 4), (6, 5)), ((7, 0), (7, 0))]


def test_connected_regions_of_a_u_shape_is_one_region():
    mask = np.zeros((5, 5), dtype=bool)
    mask[:, 0] = mask[:, 4] = mask[4, :] = True
    assert len(connected_regions(mask)) == 1


def test_convex_hull_drops_inner_points():
    square = np.array([[0, 0], [4, 0], [4, 4], [0, 4], [2, 2], [1, 3]], dtype=float)
    assert sorted(map(tuple, convex_hull(square))) == [(0, 0), (0, 4), (4, 0), (4, 4)]


@pytest.mark.parametrize("angle", [0.0, 0.3, -0.5, 1.2])
def test_min_area_rect_recovers_a_rotated_rectangle(angle: float):
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    corners = np.array([[0, 0], [40, 0], [40, 10], [0, 10]], dtype=float) @ rotation.T + [100, 100]
    inside = corners.mean(axis=0) + np.random.default_rng(0).uniform(-3, 3, (20, 2))
    box, short = min_area_rect(np.concatenate([corners, inside]))
    assert short == pytest.approx(10)
    assert sorted(map(tuple, np.round(box, 6))) == sorted(map(tuple, np.round(corners, 6)))


def test_order_box_reads_top_left_first():
    box = order_box(np.array([[10, 5], [0, 5], [0, 0], [10, 0]], dtype=float))
    np.testing.assert_array_equal(box, [[0, 0], [10, 0], [10, 5], [0, 5]])


def test_expand_rect_grows_each_side_by_the_unclip_distance():
    box = np.array([[0, 0], [30, 0], [30, 10], [0, 10]], dtype=float)
    grown, short = expand_rect(box, 1.6)
    distance = 1.6 * 300 / 80
    np.testing.assert_allclose(
        grown,
        [
            [-distance, -distance],
            [30 + distance, -distance],
            [30 + distance, 10 + distance],
            [-distance, 10 + distance],
        ],
    )
    assert short == pytest.approx(10 + 2 * distance)


def test_convex_polygon_mask_includes_edges():
    mask = convex_polygon_mask(np.array([[1, 1], [3, 1], [3, 2], [1, 2]]), 4, 5)
    assert mask.sum() == 6 and mask[1:3, 1:4].all()


def test_box_score_is_the_mean_inside_the_box():
    probability = np.zeros((10, 10), dtype=np.float32)
    probability[2:5, 2:8] = 0.8
    assert box_score(probability, np.array([[2, 2], [7, 2], [7, 4], [2, 4]], dtype=float)) == pytest.approx(
        0.8
    )


def test_boxes_from_map_finds_and_scales_text_blocks():
    probability = np.zeros((64, 128), dtype=np.float32)
    probability[10:20, 10:100] = 0.9
    probability[40:44, 20:22] = 0.9  # too thin after thresholding: dropped
    boxes, scores = boxes_from_map(probability, width=256, height=128)
    assert len(boxes) == 1 and scores[0] > 0.8
    left, top = boxes[0].min(axis=0)
    right, bottom = boxes[0].max(axis=0)
    assert left < 20 < 200 < right and top < 20 < 40 < bottom  # scaled by 2, unclipped outwards


def test_boxes_from_map_of_an_empty_map():
    assert boxes_from_map(np.zeros((32, 32), dtype=np.float32), 32, 32) == ([], [])


def test_detector_size_is_a_multiple_of_32_with_the_short_side_near_736():
    assert detector_size(260, 640) == (736, 1824)
    assert detector_size(1000, 2000) == (992, 1984)  # 62.5 rounds to even


def test_reading_order_puts_one_line_left_to_right():
    def box(x: float, y: float) -> np.ndarray:
        return np.array([[x, y], [x + 20, y], [x + 20, y + 10], [x, y + 10]], dtype=np.float32)

    ordered = reading_order(np.stack([box(100, 52), box(0, 50), box(10, 5), box(50, 45)]))
    assert [tuple(b[0]) for b in ordered] == [(10, 5), (0, 50), (50, 45), (100, 52)]
