"""The SafeTensors header: an 8-byte little-endian length, then that many bytes of JSON.

The length is checked against the file and :class:`spawnml.Limits` before anything
else is read, so a forged length never makes the loader allocate or parse much.
"""

from __future__ import annotations

import struct

from spawnml import Limits, ModelLoadError
from spawnml.formats import ModelSource

LENGTH_BYTES = 8


def looks_like_safetensors(head: bytes) -> bool:
    """Whether ``head`` starts with a plausible header length followed by ``{``."""
    if len(head) <= LENGTH_BYTES:
        return False
    (length,) = struct.unpack_from("<Q", head)
    return 2 <= length < 1 << 32 and head[LENGTH_BYTES : LENGTH_BYTES + 1] == b"{"


def check_header_length(source: ModelSource, limits: Limits) -> int:
    """The header's length in bytes, refused when it is absurd for the file or ``limits``."""
    head = source.head(LENGTH_BYTES + 1)
    if len(head) <= LENGTH_BYTES or head[LENGTH_BYTES:] != b"{":
        raise ModelLoadError(f"{source.describe()} is not a SafeTensors file: no JSON header")
    (length,) = struct.unpack_from("<Q", head)
    limits.check(
        "string length", length, limits.max_string_length, f"SafeTensors header of {source.describe()}"
    )
    if LENGTH_BYTES + length > source.size:
        raise ModelLoadError(
            f"{source.describe()} declares a {length:,}-byte SafeTensors header "
            f"but has only {source.size:,} bytes"
        )
    return length
