"""Image operations of the OCR pipeline in numpy: loading, bilinear resize, perspective crops.

Images are ``(height, width, 3)`` uint8 arrays in BGR order, the order PP-OCR models were
trained on. Sampling follows OpenCV's conventions (pixel centres at integer coordinates
plus one half for resizing; borders replicated), so crops match the reference pipeline.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
from spawnml import InvalidArgumentError

if TYPE_CHECKING:  # Pillow is imported where an image is read: registering the pipeline must not load it
    from PIL import Image

#: What the pipeline accepts as an image: a file, a Pillow image, or an RGB(A) or grey array.
ImageInput: TypeAlias = "str | os.PathLike[str] | Image.Image | np.ndarray"


def load_bgr(image: ImageInput) -> np.ndarray:
    """``image`` as a BGR uint8 array; transparent pixels are composited onto white."""
    from PIL import Image

    if isinstance(image, str | os.PathLike):
        with Image.open(image) as opened:
            return load_bgr(opened)
    if isinstance(image, np.ndarray):
        image = Image.fromarray(_as_uint8(image))
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        image = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba)
    return np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])


def resize_bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """``image`` resized to ``height`` x ``width`` by bilinear interpolation, without antialiasing."""
    if height < 1 or width < 1:
        raise InvalidArgumentError(f"cannot resize an image to {height}x{width}")
    rows = _axis_taps(image.shape[0], height)
    columns = _axis_taps(image.shape[1], width)
    pixels = image.astype(np.float32)
    pixels = _blend(pixels, *rows, axis=0)
    pixels = _blend(pixels, *columns, axis=1)
    return _like(pixels, image.dtype)


def perspective_matrix(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The 3x3 homography that maps each of four ``source`` points onto its ``target`` point."""
    equations, values = [], []
    for (x, y), (u, v) in zip(source.astype(np.float64), target.astype(np.float64), strict=True):
        equations.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        equations.append([0, 0, 0, x, y, 1, -v * x, -v * y])
        values += [u, v]
    return np.append(np.linalg.solve(np.array(equations), np.array(values)), 1.0).reshape(3, 3)


def warp_quad(image: np.ndarray, quad: np.ndarray, width: int, height: int) -> np.ndarray:
    """The quadrilateral ``quad`` (top-left, top-right, bottom-right, bottom-left) of ``image``
    straightened to ``height`` x ``width`` by bicubic sampling with replicated borders."""
    corners = np.array([[0, 0], [width, 0], [width, height], [0, height]], dtype=np.float64)
    to_source = perspective_matrix(corners, quad)
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float64)
    mapped = np.einsum("ij,jhw->ihw", to_source, np.stack([xs, ys, np.ones_like(xs)]))
    return _like(
        _bicubic(image.astype(np.float32), mapped[0] / mapped[2], mapped[1] / mapped[2]), image.dtype
    )


def _axis_taps(size: int, new_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    centres = (np.arange(new_size) + 0.5) * (size / new_size) - 0.5
    centres = np.clip(centres, 0, size - 1)
    low = np.floor(centres).astype(np.intp)
    high = np.minimum(low + 1, size - 1)
    return low, high, (centres - low).astype(np.float32)


def _blend(
    pixels: np.ndarray, low: np.ndarray, high: np.ndarray, weight: np.ndarray, axis: int
) -> np.ndarray:
    shape = [1] * pixels.ndim
    shape[axis] = -1
    weight = weight.reshape(shape)
    return np.take(pixels, low, axis=axis) * (1 - weight) + np.take(pixels, high, axis=axis) * weight


def _cubic_weights(fraction: np.ndarray, a: float = -0.75) -> list[np.ndarray]:
    """Keys' cubic convolution weights of the taps at offsets -1, 0, 1, 2 (OpenCV's ``a``)."""
    weights = []
    for offset in (-1, 0, 1, 2):
        t = np.abs(fraction - offset)
        near = ((a + 2) * t - (a + 3)) * t * t + 1
        far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        weights.append(np.where(t <= 1, near, np.where(t < 2, far, 0.0)).astype(np.float32))
    return weights


def _bicubic(pixels: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    height, width = pixels.shape[:2]
    x0, y0 = np.floor(xs), np.floor(ys)
    x_weights, y_weights = _cubic_weights(xs - x0), _cubic_weights(ys - y0)
    x0, y0 = x0.astype(np.intp), y0.astype(np.intp)
    out = np.zeros(xs.shape + pixels.shape[2:], dtype=np.float32)
    for i, y_weight in enumerate(y_weights):
        rows = np.clip(y0 + i - 1, 0, height - 1)
        for j, x_weight in enumerate(x_weights):
            weight = y_weight * x_weight
            out += pixels[rows, np.clip(x0 + j - 1, 0, width - 1)] * weight.reshape(
                weight.shape + (1,) * (pixels.ndim - 2)
            )
    return out


def _like(pixels: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        limits = np.iinfo(dtype)
        return np.clip(np.rint(pixels), limits.min, limits.max).astype(dtype)
    return pixels.astype(dtype)


def _as_uint8(array: np.ndarray) -> np.ndarray:
    if array.dtype != np.uint8:
        raise InvalidArgumentError(f"an image array must be uint8 (RGB, RGBA or grey), not {array.dtype}")
    return array
