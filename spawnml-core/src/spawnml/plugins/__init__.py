"""The plugin system: pluggy hooks under the entry-point group ``spawnml``.

See :mod:`spawnml.plugins.hookspecs` for the contract. ``SPAWNML_PLUGINS`` (comma-separated
entry-point or distribution names) restricts which installed plugins load.
"""

from __future__ import annotations

from ..formats import FormatLoader
from ..models import ModelSpec
from ..ops.registry import OperatorRegistry
from .hookspecs import LazyBackend, RegisterKernel, hookimpl
from .manager import Backends, PluginInfo, Registry, get_plugin_manager, not_loaded, refresh, registry, reset


def backends() -> Backends:
    """Installed backends by name, available or not; each is imported when first asked for."""
    return registry().backends


def formats() -> dict[str, FormatLoader]:
    """Installed format loaders by name."""
    return registry().formats


def operators() -> OperatorRegistry:
    """Every operator schema the loaded plugins registered."""
    return registry().operators


def models() -> dict[str, ModelSpec]:
    """Installed model ports and pipelines by name."""
    return registry().models


__all__ = [
    "Backends",
    "LazyBackend",
    "PluginInfo",
    "RegisterKernel",
    "Registry",
    "backends",
    "formats",
    "get_plugin_manager",
    "hookimpl",
    "models",
    "not_loaded",
    "operators",
    "refresh",
    "registry",
    "reset",
]
