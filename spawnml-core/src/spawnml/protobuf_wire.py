"""Reading protobuf's wire format by hand: varints and field tags.

Format detection looks at the first bytes of a file, before any protobuf library is imported,
to tell ONNX, Core ML and TensorFlow messages apart; these are the two primitives it needs.
"""

from __future__ import annotations

#: Wire types: a varint, and a length-delimited field (bytes, strings, embedded messages).
VARINT, LEN = 0, 2
#: A 64-bit value takes at most ten 7-bit groups.
_MAX_VARINT_BYTES = 10


class WireFormatError(ValueError):
    """The bytes are not protobuf's wire format."""


class Truncated(WireFormatError):
    """The bytes end inside a varint."""


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """The varint at ``position`` and the position after it."""
    value = 0
    for group in range(_MAX_VARINT_BYTES):
        if position >= len(data):
            raise Truncated
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << (7 * group)
        if not byte & 0x80:
            return value, position
    raise WireFormatError("a varint longer than 64 bits")


def read_tag(data: bytes, position: int) -> tuple[int, int, int]:
    """The field number and wire type of the tag at ``position``, and the position after it."""
    tag, position = read_varint(data, position)
    if tag >> 3 == 0:
        raise WireFormatError("field number 0")
    return tag >> 3, tag & 7, position
