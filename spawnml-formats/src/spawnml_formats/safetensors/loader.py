"""The SafeTensors loader: a weights-only graph whose initializers are views of the file.

The ``safetensors`` library validates the file (known types, shapes that match their byte
ranges, ranges that tile the data section exactly, a string-to-string ``__metadata__``);
SpawnML then maps the file and hands out numpy views into it, so nothing is read until a
tensor is used. A model given as bytes is validated the same way (the library copies its
data once to do so) and viewed in place.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
import safetensors
from spawnml import Limits, ModelLoadError
from spawnml.formats import FormatLoader, ModelSource
from spawnml.ir import Graph

from .dtypes import dtype_of
from .header import LENGTH_BYTES, check_header_length, looks_like_safetensors

METADATA_KEY = "__metadata__"


class SafeTensorsLoader(FormatLoader):
    """Loads ``.safetensors`` files as weights-only graphs, memory-mapped and lazy."""

    name: ClassVar[str] = "safetensors"
    extensions: ClassVar[tuple[str, ...]] = (".safetensors",)
    has_graph: ClassVar[bool] = False

    def sniff(self, head: bytes) -> bool:
        return looks_like_safetensors(head)

    def load(self, source: ModelSource, limits: Limits) -> Graph:
        length = check_header_length(source, limits)
        buffer = _validated_buffer(source, limits)
        header: dict[str, Any] = json.loads(bytes(buffer[LENGTH_BYTES : LENGTH_BYTES + length]))
        metadata = header.pop(METADATA_KEY, None) or {}
        data = buffer[LENGTH_BYTES + length :]
        initializers = {
            name: _view(data, info, limits, f"tensor {name!r} of {source.describe()}")
            for name, info in header.items()
        }
        name = source.path.stem if source.path is not None else "safetensors"
        return Graph(initializers=initializers, metadata=dict(metadata), name=name)


def _validated_buffer(source: ModelSource, limits: Limits) -> np.ndarray:
    """The whole file as read-only bytes (mapped when it has a path), once the library accepts it."""
    try:
        if source.path is not None:
            with safetensors.safe_open(source.path, framework="numpy"):
                pass
            return np.memmap(source.path, dtype=np.uint8, mode="r").view(np.ndarray)
        data = source.read(limits)
        safetensors.deserialize(data)
        return np.frombuffer(data, dtype=np.uint8)
    except safetensors.SafetensorError as error:
        raise ModelLoadError(f"{source.describe()} is not a valid SafeTensors file: {error}") from error


def _view(data: np.ndarray, info: dict[str, Any], limits: Limits, where: str) -> np.ndarray:
    """The tensor ``info`` describes, as a view of the data section."""
    dtype = dtype_of(info["dtype"], where)
    shape = tuple(info["shape"])
    limits.check_shape(shape, where)
    begin, end = info["data_offsets"]
    return data[begin:end].view(dtype).reshape(shape)
