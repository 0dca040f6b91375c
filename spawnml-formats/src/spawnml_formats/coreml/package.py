"""Reading an ``.mlpackage`` folder: the manifest names the root model file under ``Data/``.

Every path the package names is resolved (symbolic links included) and must stay inside the
package folder; the manifest and the model file are bounded by :class:`spawnml.Limits`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from spawnml import Limits, ModelLoadError, UnsafeExternalDataError

from .sniff import DATA, MANIFEST


@dataclass(frozen=True)
class Package:
    """The root model's bytes and the folder its ``@model_path`` weights are relative to."""

    model: bytes
    model_folder: Path
    described: str


def open_package(folder: Path, limits: Limits) -> Package:
    """The root model of the package at ``folder``."""
    folder = folder.resolve()
    described = repr(str(folder))
    manifest_path = inside(folder, folder / MANIFEST, described)
    limits.check("string length", manifest_path.stat().st_size, limits.max_string_length, str(manifest_path))
    try:
        manifest = json.loads(manifest_path.read_bytes())
    except (ValueError, RecursionError) as error:  # bad JSON or UTF-8, or nesting past the parser's depth
        raise ModelLoadError(f"{described}: its {MANIFEST} is not valid JSON: {error}") from None
    try:
        root = manifest["rootModelIdentifier"]
        path = manifest["itemInfoEntries"][root]["path"]
    except (KeyError, TypeError) as error:
        raise ModelLoadError(f"{described}: its {MANIFEST} names no root model ({error!r} missing)") from None
    if not isinstance(path, str):
        raise ModelLoadError(f"{described}: its {MANIFEST} gives the root model's path as {path!r}")
    model_path = folder / DATA / path
    return Package(read_inside(folder, model_path, limits, described), model_path.resolve().parent, described)


def inside(folder: Path, path: Path, described: str) -> Path:
    """``path`` resolved, refused unless it is a file inside ``folder``."""
    try:
        resolved = path.resolve()
    except (OSError, ValueError) as error:  # a NUL byte, a symlink loop
        raise ModelLoadError(f"{described} names {str(path)!r}, which cannot be resolved: {error}") from None
    if not resolved.is_relative_to(folder):
        raise UnsafeExternalDataError(f"{described} names {str(path)!r}, which lies outside its folder")
    if not resolved.is_file():
        raise ModelLoadError(f"{described} names {str(path)!r}, which is not a file")
    return resolved


def read_inside(folder: Path, path: Path, limits: Limits, described: str) -> bytes:
    """The bytes of the file ``path`` inside ``folder``, bounded by ``limits.max_file_bytes``."""
    resolved = inside(folder, path, described)
    limits.check("file size", resolved.stat().st_size, limits.max_file_bytes, str(resolved))
    try:
        return resolved.read_bytes()
    except OSError as error:
        raise ModelLoadError(f"{described}: {str(path)!r} cannot be read: {error}") from error
