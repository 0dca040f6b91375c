"""The zip ``torch.save`` format (PyTorch 1.6 and later).

The archive holds ``<folder>/data.pkl``, the object with storages as persistent ids, and
``<folder>/data/<key>``, each storage's raw elements. Every member is read at most to the
size it must have, and the archive's declared total is bounded, so zip bombs are refused:
torch stores members uncompressed, so the members may unpack to at most
``MAX_UNPACK_RATIO`` times the archive's own size (or ``UNPACK_FLOOR``, if more).
"""

from __future__ import annotations

import io
import zipfile
import zlib
from typing import Any

import numpy as np
from spawnml import Limits, ModelLoadError

from .storages import Storage
from .unpickler import unpickle

PICKLE_NAME = "data.pkl"
#: What ``zipfile`` raises on a damaged archive: bad offsets, sizes, compression or data.
ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, zlib.error)
#: How many times its own size an archive's members may unpack to.
MAX_UNPACK_RATIO = 100
#: Unpacked bytes allowed to any archive, however small.
UNPACK_FLOOR = 1 << 20


def read_archive(data: bytes, limits: Limits, where: str) -> tuple[Any, dict[str, np.ndarray]]:
    """The checkpoint's object and, by storage key, each storage's elements."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except ZIP_ERRORS as error:
        raise ModelLoadError(f"{where} is not a valid zip archive: {error}") from error
    with archive:
        members = {info.filename: info for info in archive.infolist()}
        _check_unpacked_size(sum(info.file_size for info in members.values()), len(data), limits, where)
        pickles = [name for name in members if name.rsplit("/", 1)[-1] == PICKLE_NAME]
        if len(pickles) != 1:
            raise ModelLoadError(f"{where} holds {len(pickles)} {PICKLE_NAME} files, not one")
        folder = pickles[0][: -len(PICKLE_NAME)]
        storages: dict[str, Storage] = {}
        pickle_info = members[pickles[0]]
        root = unpickle(
            io.BytesIO(_read(archive, pickle_info, pickle_info.file_size, where)), storages, limits, where
        )
        arrays = {}
        for key, storage in storages.items():
            info = members.get(f"{folder}data/{key}")
            if info is None:
                raise ModelLoadError(f"{where} has no data for storage {key!r}")
            raw = _read(archive, info, storage.numel * storage.dtype.itemsize, where)
            arrays[key] = np.frombuffer(raw, storage.dtype, storage.numel)
        return root, arrays


def _check_unpacked_size(declared: int, size: int, limits: Limits, where: str) -> None:
    """Refuse an archive whose members declare more bytes than its size can honestly hold."""
    limits.check("file size", declared, limits.max_file_bytes, f"unpacked archive {where}")
    budget = max(MAX_UNPACK_RATIO * size, UNPACK_FLOOR)
    if declared > budget:
        raise ModelLoadError(
            f"{where} is a zip bomb: its members unpack to {declared:,} bytes, more than "
            f"{MAX_UNPACK_RATIO} times its own {size:,} bytes (torch stores members uncompressed)"
        )


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, size: int, where: str) -> bytes:
    """Exactly ``size`` bytes of member ``info``, reading no more than one byte beyond."""
    try:
        with archive.open(info) as member:
            raw = member.read(size + 1)
    except ZIP_ERRORS as error:
        raise ModelLoadError(f"{where}: member {info.filename!r} cannot be read: {error}") from error
    if len(raw) != size:
        raise ModelLoadError(f"{where}: member {info.filename!r} holds {len(raw):,} bytes, not {size:,}")
    return raw
