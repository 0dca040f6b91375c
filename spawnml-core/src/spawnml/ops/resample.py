"""How Resize samples its input, for every backend: for each output position of one axis, the
input positions it reads and their weights (its taps).

Coordinates are float32 in the order onnxruntime computes them, so nearest picks the same
pixels as onnxruntime. The tables are small (taps x output size), computed on the host; a
backend only sums.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .defs.nn import CROP, LEGACY_NEAREST
from .shapes import as_text

F32 = np.float32


def source_coords(
    size: int, out: int, scale: F32, transform: str, roi: tuple[F32, F32] = (F32(0), F32(1))
) -> np.ndarray:
    """Where each output position lies in input coordinates (``roi``: the crop's start and end)."""
    x = np.arange(out, dtype=F32)
    if transform == "half_pixel":
        return (x + F32(0.5)) / scale - F32(0.5)
    if transform == "half_pixel_symmetric":  # the last sum in float64, as onnxruntime takes it
        offset = np.float64(F32(size) / F32(2) * (F32(1) - F32(out) / (scale * F32(size))))
        return (offset + (x.astype(np.float64) + 0.5) / np.float64(scale) - 0.5).astype(F32)
    if transform == "pytorch_half_pixel":
        return (x + F32(0.5)) / scale - F32(0.5) if out > 1 else np.zeros(1, F32)
    if transform == "tf_half_pixel_for_nn":
        return (x + F32(0.5)) / scale
    if transform == "align_corners":
        return x * F32(size - 1) / F32(out - 1) if out > 1 else np.zeros(1, F32)
    if transform == CROP:
        start, end = roi
        if out == 1:
            return np.full(1, F32(0.5) * (start + end) * F32(size - 1), F32)
        return start * F32(size - 1) + x * (end - start) * F32(size - 1) / F32(out - 1)
    return x / scale  # asymmetric


def nearest_positions(coords: np.ndarray, mode: str, shrinking: bool | np.bool_) -> np.ndarray:
    """The input position nearest to each coordinate under ``nearest_mode`` (as floats)."""
    if mode == "round_prefer_floor":
        return np.ceil(coords - F32(0.5))
    if mode == "round_prefer_ceil":
        return np.floor(coords + F32(0.5))
    if mode == "floor" or (mode == LEGACY_NEAREST and not shrinking):
        return np.floor(coords)
    return np.ceil(coords)


def cubic_weights(distance: np.ndarray, a: F32) -> np.ndarray:
    """Keys' cubic convolution kernel with coefficient ``a``."""
    d = np.abs(distance)
    near = ((a + F32(2)) * d - (a + F32(3))) * d * d + F32(1)
    far = ((a * d - F32(5) * a) * d + F32(8) * a) * d - F32(4) * a
    return np.where(d <= 1, near, np.where(d < 2, far, F32(0)))


def outside(
    size: int, out: int, scale: float | F32, attrs: Mapping[str, Any], roi: tuple[F32, F32]
) -> np.ndarray:
    """Which output positions of a crop fall outside the input (they take ``extrapolation_value``)."""
    coords = source_coords(size, out, F32(scale), CROP, roi)
    return (coords < 0) | (coords > F32(size - 1))


def taps(
    size: int, out: int, scale: float | F32, attrs: Mapping[str, Any], roi: tuple[F32, F32] = (F32(0), F32(1))
) -> tuple[np.ndarray, np.ndarray]:
    """``(index, weight)``, each ``(taps, out)``: int32 input positions clamped to the axis, and
    float32 weights (one tap of weight 1 for nearest). An antialiased filter widens by ``1 /
    scale`` when shrinking and, like one that excludes taps outside the input, is normalized."""
    scale = F32(scale)
    coords = source_coords(size, out, scale, as_text(attrs["coordinate_transformation_mode"]), roi)
    mode = as_text(attrs["mode"])
    if mode == "nearest":
        index = nearest_positions(coords, as_text(attrs["nearest_mode"]), scale < 1)[None, :]
        return np.clip(index, 0, size - 1).astype(np.int32), np.ones(index.shape, F32)
    antialias = bool(attrs.get("antialias", 0)) and scale < 1
    stretch = scale if antialias else F32(1)
    reach = int(np.ceil((1 if mode == "linear" else 2) / stretch))
    index = np.floor(coords).astype(np.int64)[None, :] + np.arange(1 - reach, reach + 1)[:, None]
    distance = (index - coords[None, :]).astype(F32) * stretch
    weigh: Callable[[np.ndarray], np.ndarray] = (
        (lambda d: np.maximum(F32(1) - np.abs(d), F32(0)))
        if mode == "linear"
        else (lambda d: cubic_weights(d, F32(attrs["cubic_coeff_a"])))
    )
    weight = weigh(distance)
    exclude = bool(attrs.get("exclude_outside", 0))
    if exclude:
        weight = np.where((index >= 0) & (index < size), weight, F32(0))
    if exclude or antialias:
        weight = weight / weight.sum(axis=0, keepdims=True)
    return np.clip(index, 0, size - 1).astype(np.int32), weight.astype(F32)


def rois(roi: np.ndarray | None, rank: int, axes: Sequence[int]) -> list[tuple[F32, F32]]:
    """Each axis's crop as (start, end) fractions of the input; the whole axis where ``roi`` is
    absent or empty, or does not list the axis."""
    full = [(F32(0), F32(1))] * rank
    if roi is None or roi.size == 0:
        return full
    values = roi.astype(F32).reshape(-1)
    for i, dim in enumerate(axes):
        full[dim] = (values[i], values[i + len(axes)])
    return full
