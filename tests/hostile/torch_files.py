"""Hostile PyTorch checkpoints: pickles reaching outside the allow-list, lying layouts, zip bombs.

Pickles are written opcode by opcode (protocol 2), so each says exactly what it means to.
The code-running ones would create ``outside/pwned`` if anything they name were called.
"""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

from spawnml import ModelLimitError, ModelLoadError
from spawnml_formats.torch.sniff import LEGACY_MAGIC
from spawnml_formats.torch.unpickler import UnsafePickleError

from .corpus import Build, Hostile, outside

PROTO, STOP, MARK, TUPLE, REDUCE = b"\x80\x02", b".", b"(", b"t", b"R"
EMPTY_DICT, SETITEMS, EMPTY_TUPLE, TUPLE1, BINPERSID = b"}", b"u", b")", b"\x85", b"Q"


def text(value: str) -> bytes:
    encoded = value.encode()
    return b"X" + struct.pack("<I", len(encoded)) + encoded


def integer(value: int) -> bytes:
    return b"J" + struct.pack("<i", value)


def global_(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def call(module: str, name: str, *args: bytes) -> bytes:
    return global_(module, name) + MARK + b"".join(args) + TUPLE + REDUCE


def storage(key: str = "0", numel: int = 4) -> bytes:
    return (
        MARK
        + text("storage")
        + global_("torch", "FloatStorage")
        + text(key)
        + text("cpu")
        + integer(numel)
        + TUPLE
        + BINPERSID
    )


def tensor(offset: int = 0, size: int = 4, stride: int = 1) -> bytes:
    """``torch._utils._rebuild_tensor_v2`` of a float storage of 4 elements."""
    return call(
        "torch._utils",
        "_rebuild_tensor_v2",
        storage(),
        integer(offset),
        integer(size) + TUPLE1,
        integer(stride) + TUPLE1,
        b"\x89",
        call("collections", "OrderedDict"),
    )


def state_dict(value: bytes) -> bytes:
    """A pickle of ``{"w": value}``."""
    return PROTO + EMPTY_DICT + MARK + text("w") + value + SETITEMS + STOP


def memo_forged(index: int) -> bytes:
    """A state dict whose pickle stores its dict at memo ``index`` (``LONG_BINPUT``) as its first put."""
    put = b"r" + struct.pack("<I", index)
    return PROTO + EMPTY_DICT + put + MARK + text("w") + tensor() + SETITEMS + STOP


def archive(pickle: bytes, data: bytes = bytes(16)) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zipped:
        zipped.writestr("archive/data.pkl", pickle)
        zipped.writestr("archive/data/0", data)
        zipped.writestr("archive/version", "3\n")
    return buffer.getvalue()


def legacy(pickle: bytes, data: bytes = struct.pack("<Q", 4) + bytes(16)) -> bytes:
    magic = PROTO + b"\x8a\x0a" + LEGACY_MAGIC.to_bytes(10, "little") + STOP
    version = PROTO + b"M" + struct.pack("<H", 1001) + STOP
    info = PROTO + EMPTY_DICT + text("little_endian") + b"\x88" + b"s" + STOP
    keys = PROTO + b"]" + text("0") + b"a" + STOP
    return magic + version + info + pickle + keys + data


def checkpoint(wrap, pickle: Callable) -> Build:
    """A builder of ``wrap(pickle(folder))`` as ``model.pt``; ``pickle`` may name files in the folder."""

    def build(folder: Path) -> Path:
        path = folder / "model.pt"
        path.write_bytes(wrap(pickle(folder)))
        return path

    return build


def pwn(module: str, name: str) -> Callable:
    """A state dict whose value calls ``module.name`` on a shell command creating ``outside/pwned``."""
    return lambda folder: state_dict(call(module, name, text(f"touch {outside(folder) / 'pwned'}")))


def fixed(pickle: bytes) -> Callable:
    return lambda folder: pickle


def bomb_declared() -> bytes:
    """A tiny archive whose central directory claims five members of almost 4 GiB each."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zipped:
        zipped.writestr("archive/data.pkl", state_dict(b"N"))
        for key in range(4):
            zipped.writestr(f"archive/data/{key}", b"")
    data = bytearray(buffer.getvalue())
    entry = data.find(b"PK\x01\x02")
    while entry != -1:
        struct.pack_into("<I", data, entry + 24, 0xFFFF0000)  # uncompressed size
        entry = data.find(b"PK\x01\x02", entry + 4)
    return bytes(data)


def bomb_deflated(size: int) -> bytes:
    """An archive whose data.pkl deflates ``size`` zero bytes into a few hundred KiB."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zipped:
        zipped.writestr("archive/data.pkl", bytes(size))
    assert len(buffer.getvalue()) < size // 100
    return buffer.getvalue()


@cache
def bomb_streamed(size: int) -> bytes:
    """An archive whose data.pkl deflates ``size`` zero bytes at the best ratio (about 1,000:1)."""
    buffer = io.BytesIO()
    chunk = bytes(1 << 20)
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zipped,
        zipped.open("archive/data.pkl", "w", force_zip64=True) as member,
    ):
        for _ in range(size // len(chunk)):
            member.write(chunk)
    return buffer.getvalue()


def central_directory_moved(by: int) -> bytes:
    """A valid archive whose end record places the central directory ``by`` bytes too late."""
    data = bytearray(archive(state_dict(tensor())))
    end = data.rfind(b"PK\x05\x06")
    (offset,) = struct.unpack_from("<I", data, end + 16)
    struct.pack_into("<I", data, end + 16, offset + by)
    return bytes(data)


def raw(name: str, data: bytes) -> Build:
    def build(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(data)
        return path

    return build


HOSTILE = [
    *(
        Hostile(f"torch-{kind}-{module}.{name}", checkpoint(wrap, pwn(module, name)), UnsafePickleError)
        for kind, wrap in (("zip", archive), ("legacy", legacy))
        for module, name in (("os", "system"), ("posix", "system"), ("subprocess", "check_call"))
    ),
    Hostile("torch-zip-builtins.eval", checkpoint(archive, pwn("builtins", "eval")), UnsafePickleError),
    Hostile("torch-zip-builtins.getattr", checkpoint(archive, pwn("builtins", "getattr")), UnsafePickleError),
    Hostile(
        "torch-zip-INST-os.system",
        checkpoint(archive, lambda f: PROTO + MARK + text(f"touch {outside(f)}/pwned") + b"ios\nsystem\n."),
        UnsafePickleError,
    ),
    Hostile(
        "torch-zip-torch.load",
        checkpoint(archive, fixed(state_dict(call("torch", "load", text("/etc/passwd"))))),
        UnsafePickleError,
    ),
    Hostile(
        "torch-zip-persistent-id-not-storage",
        checkpoint(archive, fixed(state_dict(text("x") + BINPERSID))),
        ModelLoadError,
    ),
    Hostile(
        "torch-zip-view-past-storage",
        checkpoint(archive, fixed(state_dict(tensor(offset=2)))),
        ModelLoadError,
    ),
    Hostile(
        "torch-zip-negative-stride", checkpoint(archive, fixed(state_dict(tensor(stride=-1)))), ModelLoadError
    ),
    Hostile(
        "torch-zip-storage-2^31-elements",
        checkpoint(archive, fixed(state_dict(call("torch._utils", "_rebuild_tensor", storage(numel=-1))))),
        ModelLoadError,
    ),
    Hostile("torch-zip-data-missing", raw("model.pt", archive(state_dict(tensor()), b"")), ModelLoadError),
    Hostile(
        "torch-legacy-view-past-storage",
        checkpoint(legacy, fixed(state_dict(tensor(size=5)))),
        ModelLoadError,
    ),
    *(
        Hostile(f"torch-{kind}-memo-index-2^31", checkpoint(wrap, fixed(memo_forged(2**31))), ModelLoadError)
        for kind, wrap in (("zip", archive), ("legacy", legacy))
    ),
    Hostile("torch-legacy-truncated", raw("model.pt", legacy(state_dict(tensor()), b"")), ModelLoadError),
    Hostile("torch-zip-bomb-declared-20gib", raw("model.pt", bomb_declared()), ModelLimitError),
    Hostile(
        "torch-zip-bomb-deflated-64mib", lambda f: raw("model.pt", bomb_deflated(64 << 20))(f), ModelLoadError
    ),
    Hostile(
        "torch-zip-bomb-1mib-deflating-to-1gib",
        lambda f: raw("model.pt", bomb_streamed(1 << 30))(f),
        ModelLoadError,
    ),
    Hostile("torch-zip-directory-offset-lies", raw("model.pt", central_directory_moved(1)), ModelLoadError),
    Hostile("torch-zip-not-a-zip", raw("model.pt", b"PK\x03\x04" + b"\x00" * 60), ModelLoadError),
]
