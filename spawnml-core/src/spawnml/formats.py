"""Model formats: what a format plugin provides, and detection by magic bytes then extension.

A model is a file, bytes in memory, or a folder of files (a package such as Core ML's
``.mlpackage``); folders are recognised by their layout instead of their first bytes.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from .errors import InvalidArgumentError, ModelLoadError, UnknownFormatError
from .ir import Graph
from .limits import DEFAULT_LIMITS, Limits, check_graph
from .ops.registry import OperatorRegistry

#: How many leading bytes format plugins get to recognise a file.
HEAD_BYTES = 64

PathOrBytes = str | os.PathLike[str] | bytes | bytearray | memoryview


@dataclass(frozen=True)
class ModelSource:
    """A model given as a path or as bytes in memory."""

    path: Path | None = None
    data: bytes | None = None

    @classmethod
    def of(cls, model: PathOrBytes | ModelSource) -> ModelSource:
        if isinstance(model, ModelSource):
            return model
        if isinstance(model, bytes | bytearray | memoryview):
            return cls(data=bytes(model))
        path = Path(model)
        if not (path.is_file() or path.is_dir()):
            raise ModelLoadError(f"model {str(path)!r} does not exist or is neither a file nor a folder")
        return cls(path=path)

    @property
    def is_folder(self) -> bool:
        """Whether the model is a folder of files rather than one file."""
        return self.path is not None and self.path.is_dir()

    @property
    def size(self) -> int:
        """Bytes of the model: of its file, its data, or every regular file in its folder."""
        if self.path is None:
            return len(self.data or b"")
        if self.is_folder:
            return sum(file.stat().st_size for file in _regular_files(self.path))
        return self.path.stat().st_size

    @property
    def folder(self) -> Path | None:
        """The folder external data must stay inside (None for in-memory models)."""
        if self.path is None:
            return None
        return self.path.resolve() if self.is_folder else self.path.resolve().parent

    @property
    def suffix(self) -> str:
        return self.path.suffix.lower() if self.path is not None else ""

    def describe(self) -> str:
        return repr(str(self.path)) if self.path is not None else f"<{self.size:,} bytes in memory>"

    def head(self, count: int = HEAD_BYTES) -> bytes:
        """The first bytes of the model (none for a folder)."""
        if self.path is None:
            return (self.data or b"")[:count]
        if self.is_folder:
            return b""
        with self.path.open("rb") as file:
            return file.read(count)

    def read(self, limits: Limits = DEFAULT_LIMITS) -> bytes:
        """All bytes of the model, refusing files above ``limits.max_file_bytes``."""
        if self.is_folder:
            raise ModelLoadError(f"{self.describe()} is a folder; its format plugin reads the files inside")
        limits.check("file size", self.size, limits.max_file_bytes, self.describe())
        return self.path.read_bytes() if self.path is not None else (self.data or b"")


def _regular_files(folder: Path) -> list[Path]:
    """Every regular file under ``folder``, symbolic links not followed."""
    return [
        path
        for root, _, names in os.walk(folder)
        for path in (Path(root) / name for name in names)
        if path.is_file() and not path.is_symlink()
    ]


class FormatLoader(ABC):
    """Base class of format plugins: recognise a file, and lower it to the IR."""

    name: ClassVar[str]
    extensions: ClassVar[tuple[str, ...]] = ()
    #: Whether the format holds a runnable graph (False for weights-only files).
    has_graph: ClassVar[bool] = True

    @abstractmethod
    def sniff(self, head: bytes) -> bool:
        """Whether the first bytes look like this format."""

    def sniff_folder(self, folder: Path) -> bool:
        """Whether a model given as a folder has this format's layout (packages such as ``.mlpackage``)."""
        return False

    @abstractmethod
    def load(self, source: ModelSource, limits: Limits) -> Graph:
        """Lower the model to a :class:`Graph`; raise :class:`ModelLoadError` subclasses."""

    #: Whether :meth:`save` writes files of this format.
    writes: ClassVar[bool] = False

    def save(self, graph: Graph, path: str | os.PathLike[str], operators: OperatorRegistry) -> None:
        """Write ``graph`` as a file of this format (formats with ``writes = True``)."""
        raise InvalidArgumentError(f"the {self.name} format plugin does not write models")


def detect(source: ModelSource, loaders: list[FormatLoader]) -> FormatLoader:
    """The loader for ``source``: by magic bytes (a folder: its layout) first, by extension second."""
    head = source.head()
    if source.path is not None and source.is_folder:
        by_magic = [loader for loader in loaders if loader.sniff_folder(source.path)]
    else:
        by_magic = [loader for loader in loaders if loader.sniff(head)]
    by_extension = [loader for loader in loaders if source.suffix in loader.extensions]
    if len(by_magic) == 1:
        return by_magic[0]
    both = [loader for loader in by_magic if loader in by_extension]
    if both:
        return both[0]
    if by_magic:
        return by_magic[0]
    if by_extension:
        return by_extension[0]
    known = ", ".join(f"{f.name} ({' '.join(f.extensions)})" for f in loaders) or "none installed"
    what = "folder" if source.is_folder else f"file (first bytes {head[:8].hex(' ')})"
    raise UnknownFormatError(f"{source.describe()} is not a recognised model {what}; known formats: {known}")


def load(model: PathOrBytes | ModelSource, limits: Limits | None = None) -> Graph:
    """Load any supported model file as a validated, bounded IR :class:`Graph`."""
    from .discovery import formats, operators

    limits = limits or DEFAULT_LIMITS
    source = ModelSource.of(model)
    limits.check("file size", source.size, limits.max_file_bytes, source.describe())
    loader = detect(source, list(formats().values()))
    graph = loader.load(source, limits)
    check_graph(graph, limits)
    graph.toposort()  # validates wiring: cycles, dangling names, duplicate producers
    operators().validate(graph)
    return graph


def save_onnx(graph: Graph, path: str | os.PathLike[str]) -> None:
    """Write ``graph`` as an ONNX file through the installed format plugin that writes ``.onnx``."""
    from .discovery import formats, operators

    for loader in formats().values():
        if loader.writes and ".onnx" in loader.extensions:
            loader.save(graph, path, operators())
            return
    raise InvalidArgumentError("no installed format plugin writes .onnx files (pip install spawnml-formats)")
