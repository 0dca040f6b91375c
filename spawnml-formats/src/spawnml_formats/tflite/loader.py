"""The TFLite format loader: recognise the ``TFL3`` identifier, read bounded, lower to the IR."""

from __future__ import annotations

import struct
from typing import ClassVar

from spawnml import Limits, ModelLoadError
from spawnml.formats import FormatLoader, ModelSource
from spawnml.ir import Graph

#: The flatbuffer file identifier of TFLite schema version 3, at offset 4.
MAGIC = b"TFL3"


class TFLiteLoader(FormatLoader):
    """Loads ``.tflite`` files as bounded IR graphs."""

    name: ClassVar[str] = "tflite"
    extensions: ClassVar[tuple[str, ...]] = (".tflite",)

    def sniff(self, head: bytes) -> bool:
        return head[4:8] == MAGIC

    def load(self, source: ModelSource, limits: Limits) -> Graph:
        # Imported here: the tflite schema package is needed for TFLite files only, not when the
        # format plugins are discovered.
        from .lowering import lower_model
        from .reader import open_model

        described = source.describe()
        data = source.read(limits)
        try:
            return lower_model(open_model(data, described, limits), limits)
        except (struct.error, IndexError, TypeError, ValueError) as error:  # offsets the reader followed
            raise ModelLoadError(f"{described} is not a valid TFLite model: {error}") from error
