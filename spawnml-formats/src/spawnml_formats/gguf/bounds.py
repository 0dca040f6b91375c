"""A bounded walk of a GGUF header, run before ``gguf.GGUFReader`` touches the file.

``GGUFReader`` trusts the counts in the header: an array length past the end of the file
makes it loop without advancing, and a tensor's size is only known once it has been mapped.
This walk checks every count, length, shape, offset and size against the bytes that are
really there and against :class:`spawnml.Limits`, reading only the header itself.
"""

from __future__ import annotations

import struct

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType
from spawnml import Limits
from spawnml.errors import ModelLoadError

from .sniff import MAGIC

VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
#: Bytes each scalar value type takes.
SCALAR_BYTES = {
    GGUFValueType.UINT8: 1,
    GGUFValueType.INT8: 1,
    GGUFValueType.BOOL: 1,
    GGUFValueType.UINT16: 2,
    GGUFValueType.INT16: 2,
    GGUFValueType.UINT32: 4,
    GGUFValueType.INT32: 4,
    GGUFValueType.FLOAT32: 4,
    GGUFValueType.UINT64: 8,
    GGUFValueType.INT64: 8,
    GGUFValueType.FLOAT64: 8,
}
#: The fewest bytes one value of a type takes (a string is at least its length).
SMALLEST = {**SCALAR_BYTES, GGUFValueType.STRING: 8, GGUFValueType.ARRAY: 12}
#: The fewest bytes one key-value pair and one tensor description take.
SMALLEST_KV, SMALLEST_TENSOR = 8 + 4 + 1, 8 + 4 + 4 + 8


class _Cursor:
    """Reads little- or big-endian fields of ``data``, refusing to pass its end."""

    def __init__(self, data: np.ndarray, where: str) -> None:
        self.data, self.where, self.pos, self.order = data, where, 0, "<"

    def fail(self, message: str) -> ModelLoadError:
        return ModelLoadError(f"GGUF file {self.where}: {message} (at byte {self.pos:,})")

    def need(self, count: int, what: str) -> None:
        if count > len(self.data) - self.pos:
            raise self.fail(f"{what} needs {count:,} bytes but only {len(self.data) - self.pos:,} remain")

    def unpack(self, fmt: str, what: str) -> int:
        size = struct.calcsize(fmt)
        self.need(size, what)
        # An array has the buffer protocol, which numpy's stubs do not declare.
        (value,) = struct.unpack_from(self.order + fmt, self.data, self.pos)  # type: ignore[arg-type]
        self.pos += size
        return value

    def string(self, what: str, limits: Limits) -> str:
        length = self.unpack("Q", what)
        limits.check("string length", length, limits.max_string_length, f"{what} of {self.where}")
        self.need(length, what)
        raw = bytes(self.data[self.pos : self.pos + length])
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise self.fail(f"{what} is not UTF-8: {error}") from None

    def count(self, what: str, smallest: int) -> int:
        """A count of items, each at least ``smallest`` bytes, that must fit in the file."""
        value = self.unpack("Q", what)
        self.need(value * smallest, f"{value:,} {what}")
        return value


def scan(data: np.ndarray, where: str, limits: Limits) -> None:
    """Check the header of the GGUF file in ``data``; raise ModelLoadError or ModelLimitError."""
    cursor = _Cursor(data, where)
    cursor.need(len(MAGIC), "the magic")
    if bytes(data[:4]) != MAGIC:
        raise cursor.fail(f"does not start with {MAGIC!r}")
    cursor.pos = 4
    version = cursor.unpack("I", "the version")
    if version & 0xFFFF == 0:  # written on a big-endian machine
        cursor.order, version = ">", int.from_bytes(version.to_bytes(4, "little"), "big")
    if version not in VERSIONS:
        raise cursor.fail(f"version {version} is not one of {list(VERSIONS)}")
    tensor_count = cursor.count("tensor descriptions", SMALLEST_TENSOR)
    kv_count = cursor.count("metadata entries", SMALLEST_KV)
    alignment = DEFAULT_ALIGNMENT
    for _ in range(kv_count):
        key = cursor.string("a metadata key", limits)
        kind = _value_type(cursor, key)
        if key == "general.alignment" and kind == GGUFValueType.UINT32:
            alignment = cursor.unpack("I", key)
            if alignment == 0 or alignment & (alignment - 1):
                raise cursor.fail(f"general.alignment {alignment} is not a power of two")
        else:
            _skip_value(cursor, kind, key, limits)
    described = [_tensor(cursor, limits) for _ in range(tensor_count)]
    data_start = -(-cursor.pos // alignment) * alignment
    _check_tensors(cursor, described, data_start, alignment, limits)


def _value_type(cursor: _Cursor, what: str) -> GGUFValueType:
    code = cursor.unpack("I", f"the type of {what}")
    try:
        return GGUFValueType(code)
    except ValueError:
        raise cursor.fail(f"{what} has unknown value type {code}") from None


def _skip_value(cursor: _Cursor, kind: GGUFValueType, key: str, limits: Limits) -> None:
    if kind == GGUFValueType.STRING:
        cursor.string(key, limits)
    elif kind == GGUFValueType.ARRAY:
        item = _value_type(cursor, f"the items of {key}")
        length = cursor.count(f"items of {key}", SMALLEST[item])
        if item in SCALAR_BYTES:
            cursor.pos += length * SCALAR_BYTES[item]  # fits: checked by count
        else:
            for _ in range(length):
                _skip_value(cursor, item, key, limits)
    else:
        cursor.need(SCALAR_BYTES[kind], key)
        cursor.pos += SCALAR_BYTES[kind]


def _tensor(cursor: _Cursor, limits: Limits) -> tuple[str, GGMLQuantizationType, tuple[int, ...], int]:
    name = cursor.string("a tensor name", limits)
    rank = cursor.unpack("I", f"the rank of tensor {name!r}")
    limits.check("rank", rank, limits.max_rank, f"tensor {name!r}")
    dims = [cursor.unpack("Q", f"the shape of tensor {name!r}") for _ in range(rank)]
    code = cursor.unpack("I", f"the type of tensor {name!r}")
    try:
        quant_type = GGMLQuantizationType(code)
    except ValueError:
        raise cursor.fail(f"tensor {name!r} has unknown GGML type {code}") from None
    offset = cursor.unpack("Q", f"the offset of tensor {name!r}")
    return name, quant_type, tuple(reversed(dims)), offset


def _check_tensors(
    cursor: _Cursor,
    described: list[tuple[str, GGMLQuantizationType, tuple[int, ...], int]],
    data_start: int,
    alignment: int,
    limits: Limits,
) -> None:
    seen: set[str] = set()
    total = 0
    for name, quant_type, shape, offset in described:
        where = f"tensor {name!r} of {cursor.where}"
        if name in seen:
            raise cursor.fail(f"tensor name {name!r} appears twice")
        seen.add(name)
        elements = limits.check_shape(shape, where)
        total += elements
        block, block_bytes = GGML_QUANT_SIZES[quant_type]
        if shape and shape[-1] % block:
            raise cursor.fail(
                f"{where}: {shape[-1]} columns are not whole {quant_type.name} blocks of {block}"
            )
        size = elements // block * block_bytes
        start = data_start + offset
        if offset % alignment or start + size > len(cursor.data):
            raise cursor.fail(
                f"{where}: {size:,} bytes at data offset {offset:,} are misaligned or pass the file's end"
            )
    limits.check("total elements", total, limits.max_total_elements, cursor.where)
