"""The legacy ``torch.save`` format (before PyTorch 1.6).

Five pickles follow each other: the magic number, the protocol version (1001), system
information (byte order, type sizes), the object itself with storages as persistent ids,
and the list of storage keys in the order their data follows. Each storage's data is then
an 8-byte little-endian element count and the raw elements.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from spawnml import Limits, ModelLoadError

from .sniff import LEGACY_MAGIC
from .storages import Storage
from .unpickler import unpickle

PROTOCOL_VERSION = 1001
COUNT_BYTES = 8


def read_legacy(data: bytes, limits: Limits, where: str) -> tuple[Any, dict[str, np.ndarray]]:
    """The checkpoint's object and, by storage key, each storage's elements as a view of ``data``."""
    stream = io.BytesIO(data)
    storages: dict[str, Storage] = {}
    if unpickle(stream, storages, limits, where) != LEGACY_MAGIC:
        raise ModelLoadError(f"{where} is not a PyTorch checkpoint: wrong magic number")
    protocol = unpickle(stream, storages, limits, where)
    if protocol != PROTOCOL_VERSION:
        raise ModelLoadError(
            f"{where} has checkpoint protocol {protocol!r}; SpawnML reads {PROTOCOL_VERSION}"
        )
    sys_info = unpickle(stream, storages, limits, where)
    if not isinstance(sys_info, dict) or sys_info.get("little_endian") is not True:
        raise ModelLoadError(f"{where} was written on a big-endian machine or without system information")
    root = unpickle(stream, storages, limits, where)
    keys = unpickle(stream, storages, limits, where)
    if not isinstance(keys, list) or any(str(key) not in storages for key in keys):
        raise ModelLoadError(f"{where} lists storage keys {keys!r:.200} that its object does not use")
    arrays, position = {}, stream.tell()
    for key in map(str, keys):
        storage = storages[key]
        count = int.from_bytes(data[position : position + COUNT_BYTES], "little")
        end = position + COUNT_BYTES + count * storage.dtype.itemsize
        if count != storage.numel or end > len(data):
            raise ModelLoadError(
                f"{where}: storage {key!r} should hold {storage.numel:,} elements; the file gives "
                f"{count:,}, ending at byte {end:,} of {len(data):,}"
            )
        arrays[key] = np.frombuffer(data, storage.dtype, count, position + COUNT_BYTES)
        position = end
    return root, arrays
