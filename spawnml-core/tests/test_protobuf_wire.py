"""Reading protobuf varints and tags by hand, as format detection does."""

from __future__ import annotations

import pytest
from spawnml.protobuf_wire import LEN, VARINT, Truncated, WireFormatError, read_tag, read_varint


def test_varints():
    assert read_varint(b"\x08", 0) == (8, 1)
    assert read_varint(b"\x00\xac\x02", 1) == (300, 3)
    assert read_varint(b"\xff" * 9 + b"\x01", 0) == (2**64 - 1, 10)


def test_tags():
    assert read_tag(b"\x08\x07", 0) == (1, VARINT, 1)
    assert read_tag(b"\x12", 0) == (2, LEN, 1)


def test_truncated_overlong_and_field_zero():
    with pytest.raises(Truncated):
        read_varint(b"\x80\x80", 0)
    with pytest.raises(WireFormatError):
        read_varint(b"\x80" * 11, 0)
    with pytest.raises(WireFormatError):
        read_tag(b"\x00", 0)
