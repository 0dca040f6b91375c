"""Model formats: what a format plugin provides, and detection by magic bytes then extension."""

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
        if not path.is_file():
            raise ModelLoadError(f"model file {str(path)!r} does not exist or is not a file")
        return cls(path=path)

    @property
    def size(self) -> int:
        return self.path.stat().st_size if self.path is not None else len(self.data or b"")

    @property
    def folder(self) -> Path | None:
        """The folder external data must stay inside (None for in-memory models)."""
        return self.path.resolve().parent if self.path is not None else None

    @property
    def suffix(self) -> str:
        return self.path.suffix.lower() if self.path is not None else ""

    def describe(self) -> str:
        return repr(str(self.path)) if self.path is not None else f"<{self.size:,} bytes in memory>"

    def head(self, count: int = HEAD_BYTES) -> bytes:
        if self.path is None:
            return (self.data or b"")[:count]
        with self.path.open("rb") as file:
            return file.read(count)

    def read(self, limits: Limits = DEFAULT_LIMITS) -> bytes:
        """All bytes of the model, refusing files above ``limits.max_file_bytes``."""
        limits.check("file size", self.size, limits.max_file_bytes, self.describe())
        return self.path.read_bytes() if self.path is not None else (self.data or b"")


class FormatLoader(ABC):
    """Base class of format plugins: recognise a file, and lower it to the IR."""

    name: ClassVar[str]
    extensions: ClassVar[tuple[str, ...]] = ()
    #: Whether the format holds a runnable graph (False for weights-only files).
    has_graph: ClassVar[bool] = True

    @abstractmethod
    def sniff(self, head: bytes) -> bool:
        """Whether the first bytes look like this format."""

    @abstractmethod
    def load(self, source: ModelSource, limits: Limits) -> Graph:
        """Lower the model to a :class:`Graph`; raise :class:`ModelLoadError` subclasses."""

    #: Whether :meth:`save` writes files of this format.
    writes: ClassVar[bool] = False

    def save(self, graph: Graph, path: str | os.PathLike[str], operators: OperatorRegistry) -> None:
        """Write ``graph`` as a file of this format (formats with ``writes = True``)."""
        raise InvalidArgumentError(f"the {self.name} format plugin does not write models")


def detect(source: ModelSource, loaders: list[FormatLoader]) -> FormatLoader:
    """The loader for ``source``: by magic bytes first, by file extension second."""
    head = source.head()
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
    raise UnknownFormatError(
        f"{source.describe()} is not a recognised model file (first bytes {head[:8].hex(' ')}); "
        f"known formats: {known}"
    )


def load(model: PathOrBytes | ModelSource, limits: Limits | None = None) -> Graph:
    """Load any supported model file as a validated, bounded IR :class:`Graph`."""
    from .plugins import formats, operators

    limits = limits or DEFAULT_LIMITS
    source = ModelSource.of(model)
    limits.check("file size", source.size, limits.max_file_bytes, source.describe())
    loader = detect(source, list(formats().values()))
    graph = loader.load(source, limits)
    check_graph(graph, limits)
    graph.toposort()  # validates wiring: cycles, dangling names, duplicate producers
    operators().validate(graph)
    return graph
