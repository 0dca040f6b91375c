"""The plugin contract. A plugin module implements any of these hooks with ``@hookimpl``.

Each hook receives a ``register`` callback and calls it once per thing it provides, so a
plugin never builds lists and core decides what to do with duplicates. Distributions
advertise plugin modules under the entry-point group ``spawnml``.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

hookspec = pluggy.HookspecMarker("spawnml")
hookimpl = pluggy.HookimplMarker("spawnml")


@hookspec
def register_backends(register: Callable[..., None]) -> None:
    """Register backend classes: ``register(MyBackend)`` (a :class:`spawnml.backend.Backend`)."""


@hookspec
def register_formats(register: Callable[..., None]) -> None:
    """Register format loaders: ``register(MyLoader())`` (a :class:`spawnml.formats.FormatLoader`)."""


@hookspec
def register_operators(register: Callable[..., None]) -> None:
    """Register operator schemas: ``register(OpSchema(...))`` (see :mod:`spawnml.ops`)."""


@hookspec
def register_models(register: Callable[..., None]) -> None:
    """Register model ports and pipelines: ``register(ModelSpec(...))`` (see :mod:`spawnml.models`)."""


@hookspec
def register_reference_models(register: Callable[..., None]) -> None:
    """Register real models for conformance: ``register(ReferenceModel(...))`` (see :mod:`spawnml.models`)."""


@hookspec
def register_commands(register: Callable[..., None]) -> None:
    """Register CLI subcommands: ``register(Command(...))`` (see :mod:`spawnml.cli`)."""
