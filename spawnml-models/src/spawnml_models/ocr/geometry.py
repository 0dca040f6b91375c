"""Plane geometry of text detection: connected regions, convex hulls, minimum-area rectangles.

Points are ``(x, y)`` rows of float arrays; a quadrilateral is four points in the order
top-left, top-right, bottom-right, bottom-left.
"""

from __future__ import annotations

import numpy as np


def connected_regions(mask: np.ndarray) -> list[np.ndarray]:
    """The 8-connected regions of a boolean ``mask``, each as the ``(x, y)`` centres of the first and
    last pixel of its horizontal runs (their convex hull is the region's)."""
    edges = np.diff(np.pad(mask.astype(np.int8), ((0, 0), (1, 1))), axis=1)
    rows, starts = np.nonzero(edges == 1)
    ends = np.nonzero(edges == -1)[1] - 1
    parent = np.arange(len(rows))

    def root(run: int) -> int:
        while parent[run] != run:
            parent[run] = parent[parent[run]]
            run = parent[run]
        return run

    row_bounds = np.searchsorted(rows, np.arange(mask.shape[0] + 1))
    for row in range(1, mask.shape[0]):
        above = np.arange(row_bounds[row - 1], row_bounds[row])
        below = np.arange(row_bounds[row], row_bounds[row + 1])
        if not len(above) or not len(below):
            continue
        touching = (starts[below][:, None] <= ends[above][None, :] + 1) & (
            starts[above][None, :] <= ends[below][:, None] + 1
        )
        for b, a in zip(*np.nonzero(touching), strict=True):
            parent[root(below[b])] = root(above[a])
    labels = np.array([root(run) for run in range(len(rows))], dtype=np.intp)
    regions = []
    for label in np.unique(labels):
        runs = labels == label
        left = np.stack([starts[runs], rows[runs]], axis=1)
        right = np.stack([ends[runs], rows[runs]], axis=1)
        regions.append(np.concatenate([left, right]).astype(np.float64))
    return regions


def convex_hull(points: np.ndarray) -> np.ndarray:
    """The convex hull of ``points``, counter-clockwise in image coordinates (monotone chain)."""
    unique = np.unique(points, axis=0)
    if len(unique) < 3:
        return unique

    def half(ordered: np.ndarray) -> list[np.ndarray]:
        chain: list[np.ndarray] = []
        for point in ordered:
            while len(chain) >= 2 and _cross(chain[-2], chain[-1], point) <= 0:
                chain.pop()
            chain.append(point)
        return chain[:-1]

    return np.array(half(unique) + half(unique[::-1]))


def min_area_rect(points: np.ndarray) -> tuple[np.ndarray, float]:
    """The corners of the smallest-area rectangle around ``points`` (rotating calipers over the
    hull's edges), in reading order, and the length of its shorter side."""
    hull = convex_hull(points)
    if len(hull) < 3:
        low, high = hull.min(axis=0), hull.max(axis=0)
        return order_box(np.array([low, [high[0], low[1]], high, [low[0], high[1]]])), 0.0
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for start, end in zip(hull, np.roll(hull, -1, axis=0), strict=True):
        along = (end - start) / np.linalg.norm(end - start)
        axes = np.array([along, [-along[1], along[0]]])
        projected = hull @ axes.T
        low, high = projected.min(axis=0), projected.max(axis=0)
        area = float(np.prod(high - low))
        if best is None or area < best[0]:
            best = (area, axes, np.array([low, [high[0], low[1]], high, [low[0], high[1]]]))
    assert best is not None  # the hull has three edges or more
    _, axes, extent = best
    corners = extent @ axes
    return order_box(corners), float(np.min(np.ptp(extent, axis=0)))


def expand_rect(box: np.ndarray, ratio: float) -> tuple[np.ndarray, float]:
    """Rectangle ``box`` grown on every side by ``ratio`` * area / perimeter, DBNet's unclip
    (a rounded offset whose minimum-area rectangle this is), and its shorter side."""
    width = np.linalg.norm(box[1] - box[0])
    height = np.linalg.norm(box[3] - box[0])
    distance = ratio * width * height / (2 * (width + height))
    along = (box[1] - box[0]) / width
    across = (box[3] - box[0]) / height
    centre = box.mean(axis=0)
    half_along = along * (width / 2 + distance)
    half_across = across * (height / 2 + distance)
    corners = centre + np.array(
        [
            -half_along - half_across,
            half_along - half_across,
            half_along + half_across,
            -half_along + half_across,
        ]
    )
    return order_box(corners), float(min(width, height) + 2 * distance)


def order_box(corners: np.ndarray) -> np.ndarray:
    """Four rectangle corners as top-left, top-right, bottom-right, bottom-left: the two leftmost
    points (by x) give the left side, each side's upper point (by y) its top."""
    by_x = corners[np.argsort(corners[:, 0], kind="stable")]
    left = by_x[:2] if by_x[1, 1] > by_x[0, 1] else by_x[1::-1]
    right = by_x[2:] if by_x[3, 1] > by_x[2, 1] else by_x[:1:-1]
    return np.array([left[0], right[0], right[1], left[1]])


def convex_polygon_mask(polygon: np.ndarray, height: int, width: int) -> np.ndarray:
    """Which pixel centres of a ``height`` x ``width`` grid lie in the convex ``polygon`` (edges included)."""
    ys, xs = np.mgrid[0:height, 0:width]
    signs = np.stack(
        [
            (end[0] - start[0]) * (ys - start[1]) - (end[1] - start[1]) * (xs - start[0])
            for start, end in zip(polygon, np.roll(polygon, -1, axis=0), strict=True)
        ]
    )
    return np.all(signs >= 0, axis=0) | np.all(signs <= 0, axis=0)


def _cross(origin: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    return float((a[0] - origin[0]) * (b[1] - origin[1]) - (a[1] - origin[1]) * (b[0] - origin[0]))
