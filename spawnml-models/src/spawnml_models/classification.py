"""ImageNet classification with MobileNetV2: torchvision's preprocessing, softmax and top-k labels.

Each image is resized so its shorter side is 256 pixels (bilinear, with Pillow, as
``torchvision.transforms.Resize(256)``), center-cropped to 224x224, scaled to [0, 1] and
normalised with the ImageNet mean and standard deviation.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
from spawnml import InvalidArgumentError
from spawnml.cli import Command

from .imagenet_labels import imagenet_labels
from .mobilenet import INPUT, load_mobilenet_v2

if TYPE_CHECKING:  # Pillow is imported where an image is read: registering the pipeline must not load it
    from PIL import Image

RESIZE, CROP = 256, 224
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

ImageLike: TypeAlias = "str | Path | Image.Image | np.ndarray"


@dataclass(frozen=True)
class Prediction:
    """One class of a top-k answer."""

    index: int
    label: str
    probability: float


class ImageClassificationPipeline:
    """Top-k ImageNet classes of photos under torchvision's MobileNetV2 ImageNet weights.

    ``weights`` is a torchvision MobileNetV2 checkpoint (default: the cached ImageNet one)
    and ``labels`` the class names by index (default: the 1000 ImageNet-1k names).
    """

    def __init__(
        self,
        weights: str | Path | None = None,
        labels: Sequence[str] | None = None,
        providers: Sequence[str] | None = None,
    ) -> None:
        self.session = load_mobilenet_v2(weights, providers)
        self.labels = tuple(labels) if labels is not None else imagenet_labels()

    def __call__(self, image: ImageLike, top_k: int = 5) -> list[Prediction]:
        """The ``top_k`` most probable classes of ``image``, most probable first."""
        if not 1 <= top_k <= len(self.labels):
            raise InvalidArgumentError(f"top_k must be between 1 and {len(self.labels)}, not {top_k}")
        probabilities = self.probabilities([image])[0]
        best = np.argsort(-probabilities, kind="stable")[:top_k]
        return [Prediction(int(i), self.labels[i], float(probabilities[i])) for i in best]

    def probabilities(self, images: Sequence[ImageLike]) -> np.ndarray:
        """Class probabilities, one softmax row per image."""
        batch = np.stack([preprocess(image) for image in images])
        logits = np.asarray(self.session.run(None, {INPUT: batch})[0], dtype=np.float32)
        if logits.shape[1] != len(self.labels):
            raise InvalidArgumentError(
                f"the model has {logits.shape[1]} classes but {len(self.labels)} labels"
            )
        return softmax(logits)


def preprocess(image: ImageLike) -> np.ndarray:
    """``image`` as a normalised float32 ``[3, 224, 224]`` array."""
    from PIL import Image

    image = _rgb(image)
    width, height = image.size
    size = (
        (RESIZE, int(RESIZE * height / width)) if width <= height else (int(RESIZE * width / height), RESIZE)
    )
    image = image.resize(size, Image.Resampling.BILINEAR)
    left, top = round((size[0] - CROP) / 2), round((size[1] - CROP) / 2)
    pixels = np.asarray(image.crop((left, top, left + CROP, top + CROP)), dtype=np.float32) / 255
    return np.ascontiguousarray(((pixels - MEAN) / STD).transpose(2, 0, 1))


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis."""
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


def _rgb(image: ImageLike) -> Image.Image:
    from PIL import Image, UnidentifiedImageError

    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim not in (2, 3):
            raise InvalidArgumentError(
                f"an image array must be uint8 HxW or HxWxC, not {image.dtype} {image.shape}"
            )
        image = Image.fromarray(image)
    elif not isinstance(image, Image.Image):
        try:
            image = Image.open(image)
        except (OSError, UnidentifiedImageError) as error:
            raise InvalidArgumentError(f"cannot read an image from {image}: {error}") from None
    return image.convert("RGB")


def configure_classify(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spawnml classify``."""
    parser.add_argument("image", metavar="IMAGE", help="a photo in any format Pillow reads")
    parser.add_argument("--top-k", type=int, default=5, help="how many classes to print (default 5)")
    parser.add_argument(
        "--providers",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        help="comma-separated providers in order of preference, e.g. webgpu,cpu",
    )


def run_classify(args: argparse.Namespace) -> int:
    """Print the top-k ImageNet classes of ``args.image`` with their probabilities."""
    start = time.perf_counter()
    predictions = ImageClassificationPipeline(providers=args.providers)(args.image, args.top_k)
    print(f"classified {args.image} in {time.perf_counter() - start:.2f} s", file=sys.stderr)
    for prediction in predictions:
        print(f"{prediction.probability:8.4f}  {prediction.index:>4}  {prediction.label}")
    return 0


CLASSIFY = Command(
    name="classify",
    help="name the ImageNet classes of a photo with MobileNetV2",
    configure=configure_classify,
    run=run_classify,
)
