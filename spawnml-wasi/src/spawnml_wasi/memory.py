"""The guest's linear memory, read and written only after every pointer and length is checked.

Arguments arrive as wasm ``i32`` values; wasi-nn treats pointers and lengths as unsigned, so they
are taken modulo 2**32 first. A range is checked against the memory's current size before a
byte is touched, so a hostile pointer or length costs the host nothing but the error.
"""

from __future__ import annotations

import struct
from typing import Any, Protocol

from .abi import LIST_BYTES, Errno, NnError

U32 = struct.Struct("<I")


def unsigned(value: int) -> int:
    """A wasm ``i32`` argument as the ``u32`` wasi-nn means."""
    return value & 0xFFFF_FFFF


class GuestMemory(Protocol):
    """What the host needs of a guest's memory."""

    def size(self) -> int:
        """Bytes the memory holds now."""
        ...

    def read(self, pointer: int, length: int) -> bytes:
        """``length`` bytes from ``pointer`` (the range already checked)."""
        ...

    def write(self, pointer: int, data: bytes) -> None:
        """``data`` at ``pointer`` (the range already checked)."""
        ...


class WasmtimeMemory:
    """A Wasmtime ``Memory`` export, seen through the store (or caller) that owns it."""

    def __init__(self, memory: Any, store: Any) -> None:
        self._memory = memory
        self._store = store

    def size(self) -> int:
        return int(self._memory.data_len(self._store))

    def read(self, pointer: int, length: int) -> bytes:
        return bytes(self._memory.read(self._store, pointer, pointer + length))

    def write(self, pointer: int, data: bytes) -> None:
        self._memory.write(self._store, data, pointer)


class BytesMemory:
    """A memory held in a ``bytearray``: the host's tests and fuzzing drive calls with it."""

    def __init__(self, data: bytearray) -> None:
        self.data = data

    def size(self) -> int:
        return len(self.data)

    def read(self, pointer: int, length: int) -> bytes:
        return bytes(self.data[pointer : pointer + length])

    def write(self, pointer: int, data: bytes) -> None:
        self.data[pointer : pointer + len(data)] = data


def check_range(memory: GuestMemory, pointer: int, length: int, what: str) -> None:
    """Raise ``invalid_argument`` unless ``[pointer, pointer + length)`` lies inside ``memory``."""
    if pointer + length > memory.size():
        raise NnError(
            Errno.INVALID_ARGUMENT,
            f"{what}: bytes {pointer}..{pointer + length} lie outside "
            f"the guest's {memory.size()}-byte memory",
        )


def read_bytes(memory: GuestMemory, pointer: int, length: int, what: str) -> bytes:
    check_range(memory, pointer, length, what)
    return memory.read(pointer, length)


def read_u32(memory: GuestMemory, pointer: int, what: str) -> int:
    return int(U32.unpack(read_bytes(memory, pointer, U32.size, what))[0])


def write_u32(memory: GuestMemory, pointer: int, value: int, what: str) -> None:
    check_range(memory, pointer, U32.size, what)
    memory.write(pointer, U32.pack(value))


def list_at(record: bytes, offset: int) -> tuple[int, int]:
    """The (pointer, length) of the ``list`` at ``offset`` of a record already read."""
    pointer, length = U32.unpack_from(record, offset)[0], U32.unpack_from(record, offset + 4)[0]
    return int(pointer), int(length)


def read_list(memory: GuestMemory, pointer: int, what: str) -> tuple[int, int]:
    """The (pointer, length) of the ``list`` at ``pointer`` in the guest's memory."""
    return list_at(read_bytes(memory, pointer, LIST_BYTES, what), 0)
