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

from spawnml.protobuf_wire import LEN, VARINT, WireFormatError, read_tag, read_varint

#: Highest ``specificationVersion`` accepted; coremltools 9 writes up to 10 (iOS 26).
MAX_SPECIFICATION_VERSION = 64
#: Where a package keeps its manifest and its items.
MANIFEST, DATA = "Manifest.json", "Data"

_DESCRIPTION, _IS_UPDATABLE, _FIRST_MODEL_KIND = 2, 10, 200


def looks_like_coreml(head: bytes) -> bool:
    """Whether ``head``, the first bytes of a file, looks like a serialized Core ML ``Model``."""
    try:
        field, wire, position = read_tag(head, 0)
        version, position = read_varint(head, position)
        if (field, wire) != (1, VARINT) or not 1 <= version <= MAX_SPECIFICATION_VERSION:
            return False
        field, wire, position = read_tag(head, position)
        if (field, wire) == (_IS_UPDATABLE, VARINT) or (field >= _FIRST_MODEL_KIND and wire == LEN):
            return True
        if (field, wire) != (_DESCRIPTION, LEN):
            return False
        _, position = read_varint(head, position)  # description length
        if read_tag(head, position)[:2] != (1, LEN):  # the first input
            return False
        _, position = read_varint(head, read_tag(head, position)[2])  # its length
        return read_tag(head, position)[:2] == (1, LEN)  # its name
    except WireFormatError:
        return False


def looks_like_package(folder: Path) -> bool:
    """Whether ``folder`` has the layout of an ``.mlpackage``: a manifest beside a ``Data`` folder."""
    return (folder / MANIFEST).is_file() and (folder / DATA).is_dir()
