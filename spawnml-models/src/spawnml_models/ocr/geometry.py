"""Plane geometry of DBNet's post-processing, on OpenCV and pyclipper as the PP-OCR pipeline uses them.

Points are ``(x, y)`` rows of float arrays; a quadrilateral is four points in the order
top-left, top-right, bottom-right, bottom-left.
"""

from __future__ import annotations

import numpy as np

from .libraries import clipper, opencv


def region_outlines(mask: np.ndarray) -> list[np.ndarray]:
    """The outline points of each 8-connected region of a boolean ``mask``."""
    cv2 = opencv()
    contours, _ = cv2.findContours(mask.astype(np.uint8) * 255, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    return [contour.reshape(-1, 2).astype(np.float32) for contour in contours]


def min_area_rect(points: np.ndarray) -> tuple[np.ndarray, float]:
    """The corners of the smallest-area rectangle around ``points``, in reading order, and the
    length of its shorter side."""
    cv2 = opencv()
    rectangle = cv2.minAreaRect(np.asarray(points, dtype=np.float32).reshape(-1, 1, 2))
    return order_box(cv2.boxPoints(rectangle)), float(min(rectangle[1]))


def unclip(box: np.ndarray, ratio: float) -> np.ndarray:
    """Quadrilateral ``box`` offset outwards by ``ratio`` * area / perimeter with rounded corners:
    DBNet's unclip, which undoes the shrinking of the text regions the model was trained on."""
    following = np.roll(box, -1, axis=0)
    area = 0.5 * abs(float((box[:, 0] * following[:, 1] - following[:, 0] * box[:, 1]).sum()))
    perimeter = float(np.linalg.norm(following - box, axis=1).sum())
    pyclipper = clipper()
    offset = pyclipper.PyclipperOffset()
    offset.AddPath(box.tolist(), pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    polygons = offset.Execute(ratio * area / perimeter)
    return np.concatenate([np.asarray(polygon, dtype=np.float32) for polygon in polygons]).reshape(-1, 2)


def polygon_mean(values: np.ndarray, polygon: np.ndarray) -> float:
    """Mean of ``values`` (H, W) over the pixels the polygon (corners truncated to whole pixels) covers."""
    height, width = values.shape
    low = np.clip(np.floor(polygon.min(axis=0)).astype(int), 0, [width - 1, height - 1])
    high = np.clip(np.ceil(polygon.max(axis=0)).astype(int), 0, [width - 1, height - 1])
    window = values[low[1] : high[1] + 1, low[0] : high[0] + 1]
    inside = np.zeros(window.shape, dtype=np.uint8)
    opencv().fillPoly(inside, [(polygon - low).astype(np.int32)], 1)
    return float(window[inside.astype(bool)].mean()) if inside.any() else 0.0


def order_box(corners: np.ndarray) -> np.ndarray:
    """Four rectangle corners as top-left, top-right, bottom-right, bottom-left: the two leftmost
    points (by x) give the left side, each side's upper point (by y) its top."""
    by_x = corners[np.argsort(corners[:, 0], kind="stable")]
    left = by_x[:2] if by_x[1, 1] > by_x[0, 1] else by_x[1::-1]
    right = by_x[2:] if by_x[3, 1] > by_x[2, 1] else by_x[:1:-1]
    return np.array([left[0], right[0], right[1], left[1]])
