"""Bounded access to a TFLite flatbuffer through the ``tflite`` schema bindings.

The bindings follow offsets without checking them, so every count and index read here is
checked against the file length and :class:`spawnml.Limits` before anything iterates or
slices with it. Offsets that point outside the file surface as ``struct.error`` or
``IndexError``, which the loader reports as an invalid model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tflite
from spawnml import Limits, ModelLoadError

SCHEMA_VERSION = 3
#: Operator code -> builtin name, e.g. 3 -> "CONV_2D".
BUILTIN_NAMES = {
    code: name for name, code in vars(tflite.BuiltinOperator).items() if not name.startswith("_")
}
#: Each vector entry of tables, offsets and indices takes at least four bytes.
_ENTRY_BYTES = 4


@dataclass(frozen=True)
class TFLiteModel:
    """A parsed model with its raw bytes, for buffers and messages."""

    model: tflite.Model
    data: bytes
    described: str

    def count(self, what: str, value: int, entry_bytes: int = _ENTRY_BYTES) -> int:
        """``value``, refused when the file is too small to hold that many entries."""
        if value < 0 or value * entry_bytes > len(self.data):
            raise ModelLoadError(
                f"{self.described} claims {value:,} {what} in a file of {len(self.data):,} bytes"
            )
        return value

    def index(self, what: str, value: int, count: int) -> int:
        """``value``, refused unless it indexes one of ``count`` entries."""
        if not 0 <= value < count:
            raise ModelLoadError(f"{self.described}: {what} index {value} is outside 0..{count - 1}")
        return value

    def buffer(self, index: int) -> bytes:
        """The bytes of buffer ``index``, inline or (for models above 2 GiB) at an offset in the file."""
        buffers = self.count("buffers", self.model.BuffersLength())
        buffer = self.model.Buffers(self.index("buffer", index, buffers))
        offset, size = buffer.Offset(), buffer.Size()
        if offset > 1:
            if offset + size > len(self.data):
                raise ModelLoadError(
                    f"{self.described}: buffer {index} spans bytes {offset:,}..{offset + size:,}, "
                    f"past the end of the {len(self.data):,}-byte file"
                )
            return self.data[offset : offset + size]
        length = self.count(f"bytes in buffer {index}", buffer.DataLength(), entry_bytes=1)
        if length == 0:
            return b""
        array = buffer.DataAsNumpy()
        if array.size != length:
            raise ModelLoadError(f"{self.described}: buffer {index} runs past the end of the file")
        return array.tobytes()

    def operator_name(self, code_index: int) -> str:
        """The builtin name (``CONV_2D``) or custom code of an operator code entry."""
        codes = self.count("operator codes", self.model.OperatorCodesLength())
        code = self.model.OperatorCodes(self.index("operator code", code_index, codes))
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin == tflite.BuiltinOperator.CUSTOM:
            return (code.CustomCode() or b"CUSTOM").decode("utf-8", "replace")
        return BUILTIN_NAMES.get(builtin, f"BUILTIN_{builtin}")


def open_model(data: bytes, described: str, limits: Limits) -> TFLiteModel:
    """The model in ``data`` with its schema version and table counts checked."""
    if len(data) < 8:
        raise ModelLoadError(f"{described} is not a valid TFLite model: only {len(data)} bytes")
    parsed = TFLiteModel(tflite.Model.GetRootAs(data, 0), data, described)
    version = parsed.model.Version()
    if version != SCHEMA_VERSION:
        raise ModelLoadError(
            f"{described} has TFLite schema version {version}; only {SCHEMA_VERSION} is read"
        )
    subgraphs = parsed.count("subgraphs", parsed.model.SubgraphsLength())
    if subgraphs == 0:
        raise ModelLoadError(f"{described} has no subgraph")
    for index in range(subgraphs):
        subgraph = parsed.model.Subgraphs(index)
        parsed.count(f"tensors in subgraph {index}", subgraph.TensorsLength())
        operators = parsed.count(f"operators in subgraph {index}", subgraph.OperatorsLength())
        limits.check("node count", operators, limits.max_nodes, f"subgraph {index} of {described}")
    return parsed


def int_vector(parsed: TFLiteModel, array: np.ndarray | int, what: str) -> list[int]:
    """A flatbuffer int vector as a list, bounded by the file size (absent vectors read as empty)."""
    if isinstance(array, int):  # the bindings return 0 for an absent vector
        return []
    parsed.count(what, array.size, entry_bytes=array.itemsize)
    return [int(item) for item in array]
