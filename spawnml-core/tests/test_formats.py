"""Model sources and format detection: files, bytes and folders (packages such as ``.mlpackage``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from spawnml import Limits, ModelLoadError, UnknownFormatError
from spawnml.formats import FormatLoader, ModelSource, detect
from spawnml.ir import Graph


class _Magic(FormatLoader):
    name: ClassVar[str] = "magic"
    extensions: ClassVar[tuple[str, ...]] = (".magic",)

    def sniff(self, head: bytes) -> bool:
        return head.startswith(b"MAGIC")

    def load(self, source: ModelSource, limits: Limits) -> Graph:
        return Graph()


class _Package(_Magic):
    """A folder format: recognised by a ``layout.json`` inside."""

    name: ClassVar[str] = "package"
    extensions: ClassVar[tuple[str, ...]] = (".pkg",)

    def sniff(self, head: bytes) -> bool:
        return False

    def sniff_folder(self, folder: Path) -> bool:
        return (folder / "layout.json").is_file()


LOADERS = [_Magic(), _Package()]


def test_folder_is_detected_by_layout_before_its_name(tmp_path: Path) -> None:
    folder = tmp_path / "model.magic"
    folder.mkdir()
    (folder / "layout.json").write_text("{}")
    (folder / "weights.bin").write_bytes(b"MAGIC" + bytes(95))
    source = ModelSource.of(folder)
    assert source.is_folder and source.head() == b"" and source.folder == folder.resolve()
    assert source.size == 2 + 100
    assert detect(source, LOADERS).name == "package"


def test_folder_without_layout_falls_back_to_its_extension(tmp_path: Path) -> None:
    folder = tmp_path / "model.pkg"
    folder.mkdir()
    assert detect(ModelSource.of(folder), LOADERS).name == "package"
    other = tmp_path / "plain"
    other.mkdir()
    with pytest.raises(UnknownFormatError, match="is not a recognised model folder"):
        detect(ModelSource.of(other), LOADERS)


def test_folder_is_never_read_as_one_file(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="is a folder; its format plugin reads the files inside"):
        ModelSource.of(tmp_path).read()


def test_symlinked_files_do_not_count_towards_a_folders_size(tmp_path: Path) -> None:
    outside = tmp_path / "outside.bin"
    outside.write_bytes(bytes(1000))
    folder = tmp_path / "package"
    folder.mkdir()
    (folder / "link.bin").symlink_to(outside)
    (folder / "own.bin").write_bytes(bytes(10))
    assert ModelSource.of(folder).size == 10


def test_missing_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist or is neither a file nor a folder"):
        ModelSource.of(tmp_path / "gone.onnx")
