"""Recognising Core ML models: a ``Model`` message's first bytes, or an ``.mlpackage`` folder's layout.

Like ONNX, ``.mlmodel`` has no magic number: a file is a serialized ``CoreML.Specification.Model``.
Writers emit fields in field-number order, so a model starts with ``specificationVersion``
(field 1, varint, tag ``0x08``) and then, in every model with inputs, a ``description`` (field 2)
whose first field is an input (field 1) whose first field is its name (field 1): the bytes
``08 v 12 L 0a L 0a``. A model without a description continues with ``isUpdatable`` (field 10)
or with its kind of model (fields from 200 on). ONNX files also start with ``08`` and may follow
with field 2, but theirs is the producer's name, which does not start with these tags.
"""

from __future__ import annotations

from pathlib import Path

#: Highest ``specificationVersion`` accepted; coremltools 9 writes up to 10 (iOS 26).
MAX_SPECIFICATION_VERSION = 64
#: Where a package keeps its manifest and its items.
MANIFEST, DATA = "Manifest.json", "Data"

_VARINT, _LEN = 0, 2
_DESCRIPTION, _IS_UPDATABLE, _FIRST_MODEL_KIND = 2, 10, 200


def looks_like_coreml(head: bytes) -> bool:
    """Whether ``head``, the first bytes of a file, looks like a serialized Core ML ``Model``."""
    try:
        field, wire, position = _tag(head, 0)
        version, position = _varint(head, position)
        if (field, wire) != (1, _VARINT) or not 1 <= version <= MAX_SPECIFICATION_VERSION:
            return False
        field, wire, position = _tag(head, position)
        if (field, wire) == (_IS_UPDATABLE, _VARINT) or (field >= _FIRST_MODEL_KIND and wire == _LEN):
            return True
        if (field, wire) != (_DESCRIPTION, _LEN):
            return False
        _, position = _varint(head, position)  # description length
        if _tag(head, position)[:2] != (1, _LEN):  # the first input
            return False
        _, position = _varint(head, _tag(head, position)[2])  # its length
        return _tag(head, position)[:2] == (1, _LEN)  # its name
    except IndexError:
        return False


def looks_like_package(folder: Path) -> bool:
    """Whether ``folder`` has the layout of an ``.mlpackage``: a manifest beside a ``Data`` folder."""
    return (folder / MANIFEST).is_file() and (folder / DATA).is_dir()


def _tag(data: bytes, position: int) -> tuple[int, int, int]:
    tag, position = _varint(data, position)
    return tag >> 3, tag & 7, position


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 64, 7):
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
    raise IndexError("varint longer than 64 bits")
