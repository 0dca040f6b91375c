"""The PyTorch checkpoint loader: a weights-only graph of the tensors a ``torch.save`` file holds.

Nested dicts and lists are flattened with dotted names (``{"model": {"fc.weight": t}}``
gives ``model.fc.weight``); tensors become initializers, other plain values
(numbers, strings, booleans, None) become ``graph.metadata`` entries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, TypeAlias

from spawnml import Limits, ModelLoadError
from spawnml.formats import FormatLoader, ModelSource
from spawnml.ir import Graph

from .archive import read_archive
from .legacy import read_legacy
from .sniff import is_legacy, is_zip_checkpoint
from .storages import TensorRef, materialize

#: What a checkpoint may hold beside tensors.
Plain: TypeAlias = int | float | str | bool | None


class TorchCheckpointLoader(FormatLoader):
    """Loads ``torch.save`` state dicts, zip or legacy, without torch and without running code."""

    name: ClassVar[str] = "torch"
    extensions: ClassVar[tuple[str, ...]] = (".pt", ".pth", ".ckpt")
    has_graph: ClassVar[bool] = False

    def sniff(self, head: bytes) -> bool:
        return is_legacy(head) or is_zip_checkpoint(head)

    def load(self, source: ModelSource, limits: Limits) -> Graph:
        where = source.describe()
        data = source.read(limits)
        read = read_legacy if is_legacy(data[:64]) else read_archive
        root, arrays = read(data, limits, where)
        graph = Graph(name=source.path.stem if source.path is not None else "checkpoint")
        for name, value in _leaves(root, "", where):
            if isinstance(value, TensorRef):
                graph.initializers[name] = materialize(value, arrays, limits, f"tensor {name!r} of {where}")
            else:
                text = str(value)
                limits.check(
                    "string length", len(text), limits.max_string_length, f"entry {name!r} of {where}"
                )
                graph.metadata[name] = text
        return graph


def _leaves(value: Any, name: str, where: str) -> Iterator[tuple[str, TensorRef | Plain]]:
    """Every tensor and plain value in nested dicts, lists and tuples, with its dotted name."""
    items: Iterable[tuple[Any, Any]]
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    elif isinstance(value, TensorRef | Plain):
        yield name, value
        return
    else:
        raise ModelLoadError(f"{where} holds a {type(value).__name__} at {name or 'the top'!r}, not tensors")
    for key, item in items:
        if not isinstance(key, str | int):
            raise ModelLoadError(f"{where} has a {type(key).__name__} key at {name or 'the top'!r}")
        yield from _leaves(item, f"{name}.{key}" if name else str(key), where)
