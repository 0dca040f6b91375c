"""GGUF metadata as the strings of ``Graph.metadata``."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from gguf import GGUFValueType, ReaderField

#: The reader's own entries: the counts are implied by the graph, the version is kept.
READER_FIELDS = {"GGUF.version": "gguf.version", "GGUF.tensor_count": None, "GGUF.kv_count": None}


def stringify(fields: dict[str, ReaderField]) -> dict[str, str]:
    """Every metadata entry as text: strings as they are, numbers and booleans as their
    shortest exact spelling (``true``/``false``), arrays as JSON lists."""
    metadata = {}
    for key, field in fields.items():
        name = READER_FIELDS.get(key, key)
        if name is not None:
            metadata[name] = _text(field)
    return metadata


def _text(field: ReaderField) -> str:
    if field.types[0] == GGUFValueType.ARRAY:
        return json.dumps([_plain(field, index) for index in field.data], ensure_ascii=False)
    return _scalar(field.types[0], field.parts[-1])


def _plain(field: ReaderField, index: int) -> Any:
    """One array item as a JSON value."""
    part = field.parts[index]
    if field.types[-1] == GGUFValueType.STRING:
        return part.tobytes().decode("utf-8")
    return part.tolist()[0] if part.size == 1 else part.tolist()


def _scalar(kind: GGUFValueType, part: np.ndarray) -> str:
    if kind == GGUFValueType.STRING:
        return part.tobytes().decode("utf-8")
    if kind == GGUFValueType.BOOL:
        return "true" if part[0] else "false"
    return str(part[0])  # numpy spells float32 and float64 with their shortest round-trip digits
