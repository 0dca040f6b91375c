"""The plugin contract. A plugin module implements any of these hooks with ``@hookimpl``.

Each hook receives a ``register`` callback and calls it once per thing it provides, so a
plugin never builds lists and core decides what to do with duplicates. Distributions
advertise plugin modules under the entry-point group ``spawnml``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    from ..backend import CheckFn

hookspec = pluggy.HookspecMarker("spawnml")
hookimpl = pluggy.HookimplMarker("spawnml")


@dataclass(frozen=True)
class Command:
    """A subcommand a plugin adds to ``spawnml``: ``spawnml NAME ...``."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int | None]


@dataclass(frozen=True)
class LazyBackend:
    """A backend registered by name and where its class lives, ``"package.module:Class"``.

    The module is imported when the backend is first asked for, so that finding the plugins
    does not import every backend's dependencies (a GPU library, numba) for a session that
    uses another backend.
    """

    name: str
    path: str


@hookspec
def register_backends(register: Callable[..., None]) -> None:
    """Register backends: ``register(LazyBackend("mine", "my_package.backend:MyBackend"))``, or
    the class itself, ``register(MyBackend)`` (a :class:`spawnml.backend.Backend` subclass),
    which imports its module when the plugins are found."""


class RegisterKernel(Protocol):
    """The ``register`` callback of :func:`register_kernels`.

    ``kernel(ctx, *inputs)`` runs ``domain::op_type`` on the backend named ``backend`` over the
    opsets ``[since, until)``, with that backend's buffers; ``dtypes`` and ``check`` are the
    guards of :meth:`spawnml.backend.KernelTable.register`.
    """

    def __call__(
        self,
        *,
        backend: str,
        op_type: str,
        kernel: Callable[..., Any],
        domain: str = "",
        since: int = 1,
        until: int | None = None,
        dtypes: Collection[Any] | None = None,
        check: CheckFn | None = None,
    ) -> None: ...


@hookspec
def register_kernels(register: RegisterKernel, backends: frozenset[str]) -> None:
    """Register kernels on backends by name, for any registered operator, without importing the
    backends' packages: ``register(backend="cpu", op_type="Mish", domain="org.trial",
    kernel=mish)``. ``backends`` are the names of the loaded backends (the parameter may be left
    out): a kernel for any other name, for an operator no plugin registers, or covering an opset
    another kernel of that backend covers, is refused."""


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
