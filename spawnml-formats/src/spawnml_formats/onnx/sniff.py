"""Recognising an ONNX file by the protobuf layout of its first bytes.

ONNX has no magic number: a file is a serialized ``ModelProto``. Protobuf writers emit
fields in field-number order, so a model starts with ``ir_version`` (field 1, varint,
tag byte ``0x08``) followed by more ``ModelProto`` fields. The heuristic walks the head
as protobuf and accepts it only when

- the first field is ``ir_version`` with a value from 1 to :data:`MAX_IR_VERSION`;
- every field seen is a ``ModelProto`` field with its declared wire type, in
  non-decreasing field-number order, and at least one follows ``ir_version``;
- the visible part of each text field (producer name and version, domain, doc string)
  is UTF-8 without NUL bytes;
- an embedded ``graph`` or ``opset_import`` message starts with a tag of its own type.

The walk stops, accepting, where a field runs past the end of the head. Other formats fail
at the first byte (GGUF ``G``, zip ``P``, pickle ``0x80``, TFLite's root-table offset) or
soon after: a safetensors header length is followed by zero bytes, which no field here
may contain or start with.
"""

from __future__ import annotations

import codecs

from spawnml.protobuf_wire import LEN, VARINT, Truncated, WireFormatError, read_tag, read_varint

#: Highest ``ir_version`` accepted; onnx 1.23 writes 14, so this leaves room for new releases.
MAX_IR_VERSION = 64

# field number -> wire type, for ModelProto, GraphProto and OperatorSetIdProto
_MODEL_FIELDS = {1: VARINT, 5: VARINT} | dict.fromkeys((2, 3, 4, 6, 7, 8, 14, 20, 25, 26), LEN)
_TEXT_FIELDS = {2, 3, 4, 6}
_GRAPH_FIELDS = dict.fromkeys((1, 2, 5, 10, 11, 12, 13, 14, 15, 16), LEN)
_OPSET_FIELDS = {1: LEN, 2: VARINT}
_EMBEDDED = {7: _GRAPH_FIELDS, 8: _OPSET_FIELDS}


def looks_like_onnx(head: bytes) -> bool:
    """Whether ``head``, the first bytes of a file, looks like a serialized ``ModelProto``."""
    position, last_field, fields = 0, 0, 0
    try:
        while position < len(head):
            field, wire, position = read_tag(head, position)
            if _MODEL_FIELDS.get(field) != wire or field < last_field or (fields == 0 and field != 1):
                return False
            value, position = read_varint(head, position)
            if field == 1 and not 1 <= value <= MAX_IR_VERSION:
                return False
            if wire == LEN:
                payload = head[position : position + value]
                if not _payload_plausible(field, payload, complete=len(payload) == value):
                    return False
                position += value
            last_field, fields = field, fields + 1
    except Truncated:  # the head ended inside a field
        pass
    except WireFormatError:
        return False
    return fields >= 2


def _payload_plausible(field: int, payload: bytes, complete: bool) -> bool:
    if field in _TEXT_FIELDS:
        if b"\0" in payload:
            return False
        try:
            codecs.getincrementaldecoder("utf-8")().decode(payload, final=complete)
        except UnicodeDecodeError:
            return False
        return True
    expected = _EMBEDDED.get(field)
    if expected is None or not payload:
        return True
    try:
        inner_field, inner_wire, _ = read_tag(payload, 0)
    except Truncated:
        return True
    return expected.get(inner_field) == inner_wire
