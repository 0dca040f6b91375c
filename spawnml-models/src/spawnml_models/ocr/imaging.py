"""Image operations of the OCR pipeline: loading (Pillow), bilinear resize and perspective crops (OpenCV).

Images are ``(height, width, 3)`` uint8 arrays in BGR order, the order PP-OCR models were
trained on; resizing and crops are OpenCV's, as in the reference pipeline.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
from spawnml import InvalidArgumentError

from .libraries import opencv

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
    return opencv().resize(image, (width, height), interpolation=opencv().INTER_LINEAR)


def warp_quad(image: np.ndarray, quad: np.ndarray, width: int, height: int) -> np.ndarray:
    """The quadrilateral ``quad`` (top-left, top-right, bottom-right, bottom-left) of ``image``
    straightened to ``height`` x ``width`` by bicubic sampling with replicated borders."""
    cv2 = opencv()
    corners = np.array([[0, 0], [width, 0], [width, height], [0, height]], dtype=np.float32)
    to_target = cv2.getPerspectiveTransform(np.asarray(quad, dtype=np.float32), corners)
    return cv2.warpPerspective(
        image, to_target, (width, height), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_CUBIC
    )


def _as_uint8(array: np.ndarray) -> np.ndarray:
    if array.dtype != np.uint8:
        raise InvalidArgumentError(f"an image array must be uint8 (RGB, RGBA or grey), not {array.dtype}")
    return array
