"""Hypothesis strategies that damage a valid file: byte flips, truncation, insertion, lying fields."""

from __future__ import annotations

import struct

from hypothesis import strategies as st

#: Values a forged count, size or offset likes to take.
INTERESTING = (
    0,
    1,
    0x7F,
    0x80,
    0xFF,
    0x7FFF,
    0xFFFF,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**32,
    2**63 - 1,
    2**64 - 1,
)
#: Where headers live: most forged fields are written into the first bytes.
HEADER_BYTES = 256


def _flip(data: bytearray, draw: st.DrawFn) -> None:
    position = draw(st.integers(0, len(data) - 1))
    data[position] ^= 1 << draw(st.integers(0, 7))


def _overwrite(data: bytearray, draw: st.DrawFn) -> None:
    position = draw(st.integers(0, len(data) - 1))
    data[position] = draw(st.integers(0, 255))


def _insert(data: bytearray, draw: st.DrawFn) -> None:
    position = draw(st.integers(0, len(data)))
    data[position:position] = draw(st.binary(min_size=1, max_size=16))


def _delete(data: bytearray, draw: st.DrawFn) -> None:
    start = draw(st.integers(0, len(data) - 1))
    del data[start : start + draw(st.integers(1, 16))]


def _truncate(data: bytearray, draw: st.DrawFn) -> None:
    del data[draw(st.integers(0, len(data) - 1)) :]


def _forge_field(data: bytearray, draw: st.DrawFn) -> None:
    """An interesting integer written over a 2-, 4- or 8-byte field, little-endian, near the start."""
    size = draw(st.sampled_from((2, 4, 8)))
    if len(data) < size:
        return
    position = draw(st.integers(0, min(len(data), HEADER_BYTES) - size))
    value = draw(st.sampled_from(INTERESTING)) % (1 << (8 * size))
    data[position : position + size] = struct.pack({2: "<H", 4: "<I", 8: "<Q"}[size], value)


MUTATIONS = (_flip, _overwrite, _insert, _delete, _truncate, _forge_field)


@st.composite
def mutated(draw: st.DrawFn, seed: bytes, most: int = 4) -> bytes:
    """``seed`` after one to ``most`` random mutations."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, most))):
        if not data:
            break
        draw(st.sampled_from(MUTATIONS))(data, draw)
    return bytes(data)
