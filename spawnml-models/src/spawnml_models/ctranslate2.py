"""A reader for CTranslate2's ``model.bin``: the named variables of a converted model, without ctranslate2.

The layout (binary version 6, written by ``ctranslate2.specs.ModelSpec._serialize``), all
little-endian: ``u32`` version, the spec name as a string, ``u32`` spec revision, ``u32``
variable count, then per variable its name, ``u8`` rank, ``u32`` per dimension, ``u8`` type
id (float32, int8, int16, int32, float16, bfloat16), ``u32`` byte count and the bytes;
then ``u32`` alias count and per alias two strings, the alias and the variable it names.
A string is a ``u16`` length that counts a trailing NUL, then the UTF-8 bytes and the NUL.

The file is memory-mapped and every length is checked against the file and
:class:`spawnml.Limits` before it is used, so a forged file is refused, not over-read.
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
from spawnml import Limits, ModelLoadError

#: The binary versions this reader understands (CTranslate2 3.x and 4.x write 6).
BINARY_VERSIONS = (6,)
#: Type ids in the order of CTranslate2's ``DataType`` enum.
DTYPES = (
    np.dtype("<f4"),
    np.dtype("i1"),
    np.dtype("<i2"),
    np.dtype("<i4"),
    np.dtype("<f2"),
    np.dtype(ml_dtypes.bfloat16),
)


@dataclass(frozen=True)
class CTranslate2Model:
    """The content of a ``model.bin``: the spec it follows and its variables, aliases resolved.

    Arrays are read-only views of the mapped file; scalars are 0-d arrays.
    """

    spec: str
    revision: int
    variables: dict[str, np.ndarray]

    def scalar(self, name: str) -> int | float:
        """The scalar variable ``name`` as a Python number."""
        value = self.variables.get(name)
        if value is None or value.ndim:
            raise ModelLoadError(f"the {self.spec} model has no scalar variable {name!r}")
        return value.item()


class _Cursor:
    """Reads the fields of ``data`` in order, refusing any that runs past its end."""

    def __init__(self, data: np.ndarray, where: str, limits: Limits) -> None:
        self.data, self.where, self.limits, self.offset = data, where, limits, 0

    def take(self, size: int, what: str) -> np.ndarray:
        end = self.offset + size
        if end > len(self.data):
            raise ModelLoadError(
                f"{self.where} ends inside {what}: {size:,} bytes wanted at offset {self.offset:,}, "
                f"{len(self.data) - self.offset:,} left"
            )
        chunk, self.offset = self.data[self.offset : end], end
        return chunk

    def unpack(self, fmt: str, what: str) -> int:
        (value,) = struct.unpack("<" + fmt, self.take(struct.calcsize(fmt), what).tobytes())
        return value

    def string(self, what: str) -> str:
        length = self.unpack("H", f"the length of {what}")
        if length == 0:
            raise ModelLoadError(f"{self.where}: {what} has a zero length (it must count its NUL)")
        raw = self.take(length, what).tobytes()
        if raw[-1] != 0:
            raise ModelLoadError(f"{self.where}: {what} is not NUL-terminated")
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError as error:
            raise ModelLoadError(f"{self.where}: {what} is not UTF-8 ({error})") from None


def read_ctranslate2(path: str | os.PathLike[str], limits: Limits | None = None) -> CTranslate2Model:
    """The spec name, revision and variables of the CTranslate2 ``model.bin`` at ``path``."""
    limits = limits or Limits()
    path = Path(path)
    where = f"CTranslate2 model {path}"
    try:
        size = path.stat().st_size
    except OSError as error:
        raise ModelLoadError(f"cannot read {where}: {error}") from None
    limits.check("file size", size, limits.max_file_bytes, where)
    if size == 0:
        raise ModelLoadError(f"{where} is empty")
    cursor = _Cursor(np.memmap(path, dtype=np.uint8, mode="r"), where, limits)

    version = cursor.unpack("I", "the binary version")
    if version not in BINARY_VERSIONS:
        raise ModelLoadError(
            f"{where} has binary version {version}; this reader reads version(s) {list(BINARY_VERSIONS)}"
        )
    spec = cursor.string("the spec name")
    revision = cursor.unpack("I", "the spec revision")
    count = cursor.unpack("I", "the variable count")
    limits.check("node count", count, limits.max_nodes, where)
    variables: dict[str, np.ndarray] = {}
    total = 0
    for index in range(count):
        name = cursor.string(f"the name of variable {index}")
        array = _variable(cursor, name)
        total += array.size
        limits.check("total elements", total, limits.max_total_elements, where)
        variables[name] = array
    for index in range(cursor.unpack("I", "the alias count")):
        alias = cursor.string(f"the name of alias {index}")
        target = cursor.string(f"the target of alias {alias!r}")
        if target not in variables:
            raise ModelLoadError(f"{where}: alias {alias!r} names {target!r}, which is not a variable")
        variables[alias] = variables[target]
    if cursor.offset != size:
        raise ModelLoadError(f"{where} has {size - cursor.offset:,} unread bytes after its aliases")
    return CTranslate2Model(spec, revision, variables)


def _variable(cursor: _Cursor, name: str) -> np.ndarray:
    """One variable's array, after its name: rank, dimensions, type id, byte count, bytes."""
    what = f"variable {name!r}"
    rank = cursor.unpack("B", f"the rank of {what}")
    cursor.limits.check("rank", rank, cursor.limits.max_rank, f"{cursor.where}, {what}")
    shape = tuple(cursor.unpack("I", f"the shape of {what}") for _ in range(rank))
    cursor.limits.check_shape(shape, f"{cursor.where}, {what}")
    type_id = cursor.unpack("B", f"the type of {what}")
    if type_id >= len(DTYPES):
        raise ModelLoadError(f"{cursor.where}: {what} has unknown type id {type_id}")
    dtype = DTYPES[type_id]
    nbytes = cursor.unpack("I", f"the byte count of {what}")
    expected = math.prod(shape) * dtype.itemsize
    if nbytes != expected:
        raise ModelLoadError(
            f"{cursor.where}: {what} of shape {list(shape)} and type {dtype} takes {expected:,} bytes, "
            f"but {nbytes:,} are declared"
        )
    return cursor.take(nbytes, f"the data of {what}").view(dtype).reshape(shape)
