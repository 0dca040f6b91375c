"""Recognising ``torch.save`` files by their first bytes.

The zip format is a zip archive whose first member is ``<folder>/data.pkl``. The legacy
format starts with a pickle (protocol 2 or later) of the integer :data:`LEGACY_MAGIC`.
"""

from __future__ import annotations

import struct

#: The number ``torch.save`` pickles first in the legacy format.
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
#: Pickle LONG1 opcode with a 10-byte payload, then the magic number in little-endian order.
LEGACY_MAGIC_PICKLED = b"\x8a\x0a" + LEGACY_MAGIC.to_bytes(10, "little")
_ZIP_LOCAL_HEADER = b"PK\x03\x04"
_ZIP_NAME_LENGTH_AT, _ZIP_NAME_AT = 26, 30


def is_legacy(head: bytes) -> bool:
    """Whether ``head`` starts like a legacy (pre-zip) ``torch.save`` file."""
    return len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5 and LEGACY_MAGIC_PICKLED in head[2:24]


def is_zip_checkpoint(head: bytes) -> bool:
    """Whether ``head`` starts like a zip ``torch.save`` archive (first member ``*/data.pkl``)."""
    if not head.startswith(_ZIP_LOCAL_HEADER) or len(head) < _ZIP_NAME_AT:
        return False
    (length,) = struct.unpack_from("<H", head, _ZIP_NAME_LENGTH_AT)
    name = head[_ZIP_NAME_AT : _ZIP_NAME_AT + length]
    return name == b"data.pkl" or name.endswith(b"/data.pkl")
