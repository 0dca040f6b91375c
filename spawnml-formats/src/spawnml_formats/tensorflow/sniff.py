"""Recognising a frozen TensorFlow ``GraphDef`` by the protobuf layout of its first bytes.

A GraphDef has no magic number. TensorFlow serializes fields in field-number order, so a
graph with nodes starts with its first ``NodeDef`` (field 1, tag ``0x0A``), which starts with
the node's ``name`` (field 1, ``0x0A``) and then its ``op`` (field 2, ``0x12``). The check
accepts a head only when the node's length can hold the fields seen, the visible part of the
name is printable UTF-8, and a fully visible op name is an identifier (``Conv2D``, ``_Arg``).
Other formats fail within the first three bytes: ONNX and Core ML start with a varint field
(``0x08``), a SavedModel too; GGUF, zip, pickle and TFLite start with other bytes, and a
safetensors header length is followed by zero bytes, which no tag here may be.
"""

from __future__ import annotations

import codecs
import re

from spawnml.protobuf_wire import WireFormatError, read_varint

_NODE, _NAME, _OP = 0x0A, 0x0A, 0x12
_OP_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def looks_like_graphdef(head: bytes) -> bool:
    """Whether ``head``, the first bytes of a file, looks like a serialized ``GraphDef``."""
    try:
        if head[:1] != bytes([_NODE]):
            return False
        node_length, position = read_varint(head, 1)
        end = position + node_length
        if head[position : position + 1] == bytes([_NAME]):
            name, position = _field(head, position, end)
            if name is None or not _printable(name, complete=position <= len(head)):
                return False
            if position >= len(head):
                return True
        if head[position : position + 1] != bytes([_OP]):
            return False
        op, _ = _field(head, position, end)
        return op is not None and (not op or _OP_NAME.fullmatch(op) is not None)
    except WireFormatError:
        return False


def _field(head: bytes, position: int, end: int) -> tuple[bytes | None, int]:
    """The visible bytes of the length-delimited field at ``position`` and where it ends; None
    when it is empty or runs past the end of its node."""
    length, start = read_varint(head, position + 1)
    if length == 0 or start + length > end:
        return None, start + length
    return head[start : start + length], start + length


def _printable(text: bytes, complete: bool) -> bool:
    try:
        decoded = codecs.getincrementaldecoder("utf-8")().decode(text, final=complete)
    except UnicodeDecodeError:
        return False
    return decoded.isprintable()
