"""What the plugins registered, for the layers below the plugin layer, which never import it.

Passes, tensors, sessions, autograd and the format dispatch look up the loaded operators,
backends and formats here. The package installs the plugin layer as the source when it is
imported (``spawnml/__init__``), without importing it: the plugins load when first asked for.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Protocol

from .errors import PluginError

if TYPE_CHECKING:
    from .backend import Backend
    from .formats import FormatLoader
    from .ops.registry import OperatorRegistry


class Source(Protocol):
    """The plugin layer as the layers below it see it: :mod:`spawnml.plugins`."""

    def backends(self) -> MutableMapping[str, Backend]: ...

    def formats(self) -> dict[str, FormatLoader]: ...

    def operators(self) -> OperatorRegistry: ...

    def not_loaded(self, kind: str, name: str) -> str: ...


_source: Callable[[], Source] | None = None


def install(source: Callable[[], Source]) -> None:
    """Make ``source()`` (called on each look-up, so it may load the plugins lazily) the source."""
    global _source
    _source = source


def _installed() -> Source:
    if _source is None:
        raise PluginError("no plugin source is installed: import spawnml, which installs it")
    return _source()


def operators() -> OperatorRegistry:
    """Every operator schema the loaded plugins registered."""
    return _installed().operators()


def backends() -> MutableMapping[str, Backend]:
    """The installed backends by name, available or not."""
    return _installed().backends()


def formats() -> dict[str, FormatLoader]:
    """The installed format loaders by name."""
    return _installed().formats()


def not_loaded(kind: str, name: str) -> str:
    """Why no loaded plugin provides ``name`` of ``kind``, for an error message."""
    return _installed().not_loaded(kind, name)
