"""ML program weights in blob storage files (``weights/weight.bin``, MIL blob format version 2).

A file starts with a 64-byte header (``uint32 count, uint32 version``); each blob is a 64-byte
metadata record (``uint32 sentinel 0xDEADBEEF, uint32 type, uint64 size, uint64 data offset``)
that a ``const`` operation points at by its offset, and the data it describes. Every offset and
size is checked against the file before anything is sliced.
"""

from __future__ import annotations

import struct
from functools import cache
from pathlib import Path

import numpy as np
from spawnml import Limits, ModelLoadError

from .package import read_inside

#: The only blob storage version Core ML defines.
VERSION = 2
SENTINEL = 0xDEADBEEF
#: The prefix of blob file names: the folder holding the model file.
MODEL_PATH = "@model_path/"
_HEADER = struct.Struct("<II")
_METADATA = struct.Struct("<IIQQ")
_RECORD_BYTES = 64


@cache
def blob_dtypes() -> dict[int, np.dtype]:
    """Blob data type codes -> dtypes (sub-byte and 8-bit float types are not read);
    made on first use, since importing ml_dtypes takes most of a second."""
    import ml_dtypes

    return {
        1: np.dtype(np.float16),
        2: np.dtype(np.float32),
        3: np.dtype(np.uint8),
        4: np.dtype(np.int8),
        5: np.dtype(ml_dtypes.bfloat16),
        6: np.dtype(np.int16),
        7: np.dtype(np.uint16),
        14: np.dtype(np.int32),
        15: np.dtype(np.uint32),
    }


class BlobFiles:
    """The blob files of one model, each read once, inside the folder of the model file."""

    def __init__(self, folder: Path | None, limits: Limits, described: str) -> None:
        self.folder, self.limits, self.described = folder, limits, described
        self._files: dict[str, bytes] = {}

    def read(self, name: str, offset: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """The ``dtype`` array of ``shape`` whose metadata record is at ``offset`` of file ``name``."""
        data = self._file(name)
        where = f"blob at offset {offset:,} of {name!r} in {self.described}"
        if offset < _RECORD_BYTES or offset + _RECORD_BYTES > len(data):
            raise ModelLoadError(f"{where}: the offset is outside the {len(data):,}-byte file's records")
        sentinel, kind, size, start = _METADATA.unpack_from(data, offset)
        if sentinel != SENTINEL:
            raise ModelLoadError(f"{where}: no blob record there (sentinel {sentinel:#x})")
        if blob_dtypes().get(kind) != dtype:
            raise ModelLoadError(f"{where} holds data type {kind}, but the program declares {dtype}")
        if start + size > len(data):
            raise ModelLoadError(f"{where}: its data spans bytes {start:,}..{start + size:,}, past the file")
        elements = self.limits.check_shape(shape, where)
        if size != elements * dtype.itemsize:
            raise ModelLoadError(f"{where} holds {size:,} bytes, not the {shape} {dtype} values declared")
        return np.frombuffer(data, dtype, elements, start).reshape(shape)

    def _file(self, name: str) -> bytes:
        if name not in self._files:
            if self.folder is None:
                raise ModelLoadError(
                    f"{self.described} keeps weights in {name!r}; load the .mlpackage folder, "
                    "or the model file inside it, rather than its bytes"
                )
            if not name.startswith(MODEL_PATH):
                raise ModelLoadError(f"{self.described} names weight file {name!r}, not under {MODEL_PATH}")
            path = self.folder / name.removeprefix(MODEL_PATH)
            data = read_inside(self.folder, path, self.limits, self.described)
            if len(data) < _RECORD_BYTES:
                raise ModelLoadError(f"{name!r} of {self.described} is too short for a blob file header")
            _, version = _HEADER.unpack_from(data)
            if version != VERSION:
                raise ModelLoadError(
                    f"{name!r} of {self.described} has blob storage version {version}, not 2"
                )
            self._files[name] = data
        return self._files[name]
