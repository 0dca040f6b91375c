"""Reading tensor data that an ONNX file keeps in a separate file, confined to its folder.

A tensor with ``data_location = EXTERNAL`` names a ``location`` relative to the model's
folder, an ``offset`` and a ``length``. The location must stay inside that folder: absolute
paths, ``..`` escapes and symlinks that resolve elsewhere are refused with
:class:`UnsafeExternalDataError`, as is external data in a model given as bytes (it has no
folder). The byte range must lie inside the file and match the size the tensor's shape
asks for, and only that range is read.
"""

from __future__ import annotations

import stat
from pathlib import Path, PurePosixPath, PureWindowsPath

from spawnml import ModelLoadError, UnsafeExternalDataError

from .proto import TensorProto
from .values import text


def read_external_data(tensor: TensorProto, folder: Path | None, nbytes: int, where: str) -> bytes:
    """The ``nbytes`` bytes of ``tensor``'s external data, read from inside ``folder``."""
    entries = {
        text(entry.key, f"external data key of {where}"): text(entry.value, f"external data of {where}")
        for entry in tensor.external_data
    }
    location = entries.get("location", "")
    if not location:
        raise ModelLoadError(f"{where} has external data without a location")
    if folder is None:
        raise UnsafeExternalDataError(
            f"{where} keeps its data in {location!r} next to the model file, but the model was "
            "given as bytes; load it from its path instead"
        )
    path = _confined(folder, location, where)
    offset = _integer(entries, "offset", 0, where)
    length = _integer(entries, "length", nbytes, where)
    if length != nbytes:
        raise ModelLoadError(
            f"{where} declares {length:,} bytes of external data but its shape needs {nbytes:,}"
        )
    size = path.stat().st_size
    if offset + length > size:
        raise ModelLoadError(
            f"{where} reads bytes {offset:,}..{offset + length:,} of {location!r}, which has only {size:,}"
        )
    with path.open("rb") as file:
        file.seek(offset)
        data = file.read(length)
    if len(data) != length:
        raise ModelLoadError(f"{where}: {location!r} ended after {len(data):,} of {length:,} bytes")
    return data


def _confined(folder: Path, location: str, where: str) -> Path:
    """The regular file ``location`` names, refusing any path that leaves ``folder``."""
    if PurePosixPath(location).is_absolute() or PureWindowsPath(location).anchor:
        raise UnsafeExternalDataError(f"{where} names external data by absolute path {location!r}")
    root = folder.resolve()
    try:
        path = (root / location).resolve()
    except (OSError, ValueError) as error:
        raise ModelLoadError(
            f"{where} names external data {location!r} that cannot be resolved: {error}"
        ) from error
    if not path.is_relative_to(root):
        raise UnsafeExternalDataError(
            f"{where} names external data {location!r}, which resolves to {str(path)!r} outside the "
            f"model's folder {str(root)!r}"
        )
    try:
        mode = path.stat().st_mode
    except OSError as error:
        raise ModelLoadError(f"{where}: external data file {location!r} cannot be read: {error}") from error
    if not stat.S_ISREG(mode):
        raise ModelLoadError(f"{where}: external data {location!r} is not a regular file")
    return path


def _integer(entries: dict[str, str], key: str, default: int, where: str) -> int:
    text = entries.get(key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ModelLoadError(f"{where} has external data {key} {text!r}, not an integer") from None
    if value < 0:
        raise ModelLoadError(f"{where} has a negative external data {key} ({value})")
    return value
