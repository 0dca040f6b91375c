"""Loading plugins from entry points and collecting what they register."""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import threading
from collections.abc import Callable, Collection, Iterator, MutableMapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from ..backend import Backend, CheckFn
from ..errors import PluginError, SpawnMLError
from ..formats import FormatLoader
from ..models import ModelSpec, ReferenceModel
from ..ops.registry import OperatorRegistry
from ..ops.schema import OpSchema
from ..version import __version__
from . import hookspecs
from .hookspecs import Command, LazyBackend

ENTRY_POINT_GROUP = "spawnml"
#: Comma-separated entry-point names (or distribution names) to load; unset loads all.
PLUGINS_ENV = "SPAWNML_PLUGINS"
#: Core's own plugins, registered through the same hooks as everybody else's.
BUILTIN_PLUGINS = ("spawnml.plugins.builtin",)


@dataclass
class PluginInfo:
    """One loaded plugin: where it comes from and what it registered."""

    name: str
    distribution: str = ""
    version: str = ""
    builtin: bool = False
    provides: dict[str, list[str]] = field(default_factory=dict)


class Backends(MutableMapping[str, Backend]):
    """The installed backends by name, in the order they were registered. A backend registered
    as a :class:`LazyBackend` is imported and made when first asked for; its name is known
    before, so listing or checking names imports nothing."""

    def __init__(self) -> None:
        self._entries: dict[str, Backend | LazyBackend] = {}
        self._owners: dict[str, str] = {}  # a lazy backend's name -> the plugin registering it
        self._making = threading.Lock()

    def add_lazy(self, entry: LazyBackend, plugin: str) -> None:
        self._entries[entry.name] = entry
        self._owners[entry.name] = plugin

    def __getitem__(self, name: str) -> Backend:
        entry = self._entries[name]
        if isinstance(entry, Backend):
            return entry
        with self._making:  # two threads asking at once get the same instance
            entry = self._entries[name]
            if isinstance(entry, LazyBackend):
                entry = self._entries[name] = _backend_class(entry, self._owners[name])()
        return entry

    def __setitem__(self, name: str, backend: Backend) -> None:
        self._entries[name] = backend

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries


def _backend_class(entry: LazyBackend, plugin: str) -> type[Backend]:
    """The class a lazy backend names, imported now; refused unless it is a backend of that name."""
    module_name, _, class_name = entry.path.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), class_name)
    except Exception as error:  # a broken backend must say which plugin and path it came from
        raise PluginError(
            f"plugin {plugin!r}: backend {entry.name!r} ({entry.path}) failed to import: "
            f"{type(error).__name__}: {error}"
        ) from error
    _check_backend_class(found, plugin)
    if found.name != entry.name:
        raise PluginError(
            f"plugin {plugin!r} registered backend {entry.name!r} as {entry.path}, "
            f"whose name is {found.name!r}"
        )
    return found


#: The hooks whose registrations a session does not need, collected when first asked for: finding
#: the plugins then imports no model port, pipeline or command a session never uses.
DEFERRED_HOOKS = ("register_models", "register_reference_models", "register_commands")


@dataclass
class Registry:
    """Everything the loaded plugins registered. Models, reference models and commands (and the
    ``provides`` of the plugins registering them) are collected on first access."""

    backends: Backends = field(default_factory=Backends)
    formats: dict[str, FormatLoader] = field(default_factory=dict)
    operators: OperatorRegistry = field(default_factory=OperatorRegistry)
    #: (kind, name) -> the plugin that registered it, to name both sides of a duplicate.
    owners: dict[tuple[str, str], str] = field(default_factory=dict)
    _models: dict[str, ModelSpec] = field(default_factory=dict)
    _reference_models: dict[str, ReferenceModel] = field(default_factory=dict)
    _commands: dict[str, Any] = field(default_factory=dict)
    _plugins: dict[str, PluginInfo] = field(default_factory=dict)
    #: Collects the deferred hooks' registrations; None once it has run.
    _deferred: Callable[[], None] | None = field(default=None, repr=False)
    #: Held while collecting: another thread must not see the registrations half made.
    _collecting: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    _complete: bool = field(default=False, repr=False, compare=False)

    def _finished(self) -> Registry:
        if not self._complete:
            with self._collecting:
                collect, self._deferred = self._deferred, None
                if collect is not None:  # None as well in a hook that asks while it is collected
                    collect()
                    self._complete = True
        return self

    @property
    def models(self) -> dict[str, ModelSpec]:
        return self._finished()._models

    @property
    def reference_models(self) -> dict[str, ReferenceModel]:
        return self._finished()._reference_models

    @property
    def commands(self) -> dict[str, Any]:
        return self._finished()._commands

    @property
    def plugins(self) -> dict[str, PluginInfo]:
        return self._finished()._plugins


_manager: pluggy.PluginManager | None = None
_registry: Registry | None = None
_entry_points: dict[str, EntryPoint] = {}  # plugin name -> the entry point it came from


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, loading built-in and entry-point plugins once."""
    global _manager
    if _manager is None:
        manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
        manager.add_hookspecs(hookspecs)
        for module_name in BUILTIN_PLUGINS:
            manager.register(importlib.import_module(module_name), name=module_name)
        for entry_point in _selected_entry_points():
            try:
                plugin = entry_point.load()
            except Exception as error:  # a broken plugin must not take the others down silently
                raise PluginError(
                    f"plugin {entry_point.name!r} ({entry_point.value}) failed to import: {error}"
                ) from error
            try:
                manager.register(plugin, name=entry_point.name)
            except pluggy.PluginValidationError as error:  # a hook's parameters are not its spec's
                raise PluginError(f"plugin {entry_point.name!r} ({entry_point.value}): {error}") from error
            _entry_points[entry_point.name] = entry_point
        _manager = manager
    return _manager


def _selected_entry_points() -> list[EntryPoint]:
    wanted = os.environ.get(PLUGINS_ENV)
    found = list(entry_points(group=ENTRY_POINT_GROUP))
    if wanted is None:
        return found
    names = {name.strip() for name in wanted.split(",") if name.strip()}
    return [ep for ep in found if ep.name in names or (ep.dist is not None and ep.dist.name in names)]


def not_loaded(kind: str, name: str) -> str:
    """Why no loaded plugin provides ``name`` (``kind``: "backend", "format", "model" or
    "command"), to follow the name in an error: "is not loaded: <the installed distributions
    providing it> ..., which ``SPAWNML_PLUGINS`` leaves out", or "is not installed: ...". Never a
    guessed package name. Only for errors: it imports the plugins ``SPAWNML_PLUGINS`` left out."""
    hook = getattr(hookspecs, f"register_{kind}s")
    selected = {(ep.name, ep.value) for ep in _selected_entry_points()}
    providers = []
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        if (entry_point.name, entry_point.value) in selected:
            continue
        if name in _names_provided(entry_point, hook.__name__):
            dist = entry_point.dist
            providers.append(f"{dist.name if dist else entry_point.value} (plugin {entry_point.name!r})")
    if providers:
        wanted = os.environ.get(PLUGINS_ENV)
        return (
            f"is not loaded: {', '.join(providers)} provides it, and {PLUGINS_ENV}={wanted!r} leaves that out"
        )
    return f"is not installed: no installed distribution provides {kind} {name!r}"


def _names_provided(entry_point: EntryPoint, hook_name: str) -> list[str]:
    """The names an entry point's plugin registers through ``hook_name``, on a scratch manager."""
    names: list[str] = []
    try:
        scratch = pluggy.PluginManager(ENTRY_POINT_GROUP)
        scratch.add_hookspecs(hookspecs)
        scratch.register(entry_point.load(), name=entry_point.name)
        for impl in getattr(scratch.hook, hook_name).get_hookimpls():
            impl.function(register=lambda item: names.append(getattr(item, "name", "")))
    except Exception:  # a broken plugin says so when it is selected; here it provides nothing
        return []
    return names


def registry() -> Registry:
    """What the plugins registered, collected once and cached until :func:`refresh`."""
    global _registry
    if _registry is None:
        _registry = _collect(get_plugin_manager())
    return _registry


def refresh() -> Registry:
    """Collect registrations again, e.g. after a test registered a plugin on the manager."""
    global _registry
    _registry = None
    return registry()


def reset() -> None:
    """Forget the manager and the registrations; the next use loads plugins anew."""
    global _manager, _registry
    _manager = None
    _registry = None
    _entry_points.clear()


def _collect(manager: pluggy.PluginManager) -> Registry:
    result = Registry()
    for name, _ in manager.list_name_plugin():
        entry_point = _entry_points.get(name)
        dist = entry_point.dist if entry_point is not None else None
        result._plugins[name] = PluginInfo(
            name=name,
            distribution=dist.name if dist is not None else "spawnml-core",
            version=dist.version if dist is not None else __version__,
            builtin=name in BUILTIN_PLUGINS,
        )
    _check_hook_names(manager, result)
    adders: dict[str, Adder] = {
        "register_backends": _add_backend,
        "register_formats": _named("formats", "format", FormatLoader),
        "register_operators": _add_operator,
        "register_models": _named("_models", "model", ModelSpec),
        "register_reference_models": _named("_reference_models", "reference model", ReferenceModel),
        "register_commands": _named("_commands", "command", Command),
    }
    for hook_name, add in adders.items():
        if hook_name not in DEFERRED_HOOKS:
            _run_hook(manager, result, hook_name, add)

    def collect_deferred() -> None:
        for hook_name in DEFERRED_HOOKS:
            _run_hook(manager, result, hook_name, adders[hook_name])

    result._deferred = collect_deferred
    for impl in manager.hook.register_kernels.get_hookimpls():  # after the backends they extend
        info = result._plugins[impl.plugin_name]
        registrar = _kernel_registrar(result, info)
        _call_hook(impl, info, "register_kernels", register=registrar, backends=frozenset(result.backends))
    return result


def _run_hook(manager: pluggy.PluginManager, result: Registry, hook_name: str, add: Adder) -> None:
    """Call every implementation of ``hook_name`` with a ``register`` that adds to ``result``."""
    for impl in getattr(manager.hook, hook_name).get_hookimpls():
        info = result._plugins[impl.plugin_name]

        def register(item: Any, _info: PluginInfo = info) -> None:
            label = add(result, _info.name, item)
            _info.provides.setdefault(hook_name.removeprefix("register_"), []).append(label)

        _call_hook(impl, info, hook_name, register=register)


def _describe(info: PluginInfo) -> str:
    """A plugin as errors name it: its distribution and entry-point name."""
    if info.builtin or info.name not in _entry_points:
        return f"plugin {info.name!r}" + (" (spawnml-core)" if info.builtin else "")
    return f"{info.distribution} {info.version} (plugin {info.name!r})"


def _check_hook_names(manager: pluggy.PluginManager, result: Registry) -> None:
    """Refuse a hook implementation whose name is no hook of the contract (a typo would
    otherwise be ignored: pluggy only reports it from ``check_pending``)."""
    known = sorted(name for name in vars(hookspecs) if name.startswith("register_"))
    for hook_name, caller in vars(manager.hook).items():
        if hook_name.startswith("_") or caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            close = difflib.get_close_matches(hook_name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            plugin = _describe(result._plugins[impl.plugin_name])
            raise PluginError(
                f"{plugin} implements unknown hook {hook_name!r}{hint}; the hooks are {', '.join(known)}"
            )


def _call_hook(impl: pluggy.HookImpl, info: PluginInfo, hook: str, **arguments: Any) -> None:
    """Run one hook implementation with the ``arguments`` it takes; a returned value or an
    unexpected exception fails loading."""
    try:
        returned = impl.function(**{name: arguments[name] for name in impl.argnames})
    except SpawnMLError:
        raise
    except Exception as error:
        raise PluginError(f"{_describe(info)}: hook {hook} raised {type(error).__name__}: {error}") from error
    if returned is not None:
        raise PluginError(
            f"{_describe(info)}: hook {hook} returned {_short(returned)} instead of calling "
            f"register(...) once for each item; it must return None"
        )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


#: Adds one registered item to the registry and returns its label.
Adder = Callable[[Registry, str, Any], str]


def _named(field: str, kind: str, expected: type[Any]) -> Adder:
    """An adder for instances of ``expected`` kept by their ``name`` in the registry's ``field``."""

    def add(result: Registry, plugin: str, item: Any) -> str:
        if not isinstance(item, expected):
            raise PluginError(f"plugin {plugin!r} registered {item!r}, not a {expected.__name__}")
        _store(result, getattr(result, field), item.name, item, kind, plugin)
        return item.name

    return add


def _add_backend(result: Registry, plugin: str, registered: Any) -> str:
    if isinstance(registered, LazyBackend):
        if not registered.name or registered.path.count(":") != 1:
            raise PluginError(
                f"plugin {plugin!r} registered {registered!r}: a lazy backend needs a name and a "
                f"path 'package.module:Class'"
            )
        _claim(result, result.backends, registered.name, "backend", plugin)
        result.backends.add_lazy(registered, plugin)
        return registered.name
    _check_backend_class(registered, plugin)
    _store(result, result.backends, registered.name, registered(), "backend", plugin)
    return registered.name


def _check_backend_class(registered: Any, plugin: str) -> None:
    """Refuse what is not a concrete, named :class:`Backend` subclass."""
    if not (isinstance(registered, type) and issubclass(registered, Backend)):
        raise PluginError(f"plugin {plugin!r} registered {registered!r}, not a Backend subclass")
    if inspect.isabstract(registered) or not getattr(registered, "name", ""):
        raise PluginError(
            f"plugin {plugin!r} registered {registered.__name__}, which is abstract or has no name"
        )


def _add_operator(result: Registry, plugin: str, schema: Any) -> str:
    if not isinstance(schema, OpSchema):
        raise PluginError(f"plugin {plugin!r} registered {schema!r}, not an OpSchema")
    label = f"{schema.qualified_name}-{schema.since_version}"
    try:
        result.operators.register(schema)
    except PluginError as error:
        raise PluginError(f"{error}: {_both(result, ('operator', label), plugin)}") from None
    result.owners["operator", label] = plugin
    return label


def _kernel_registrar(result: Registry, info: PluginInfo) -> Callable[..., None]:
    """The ``register`` a plugin's ``register_kernels`` receives: :func:`_add_kernel` for it,
    refusing arguments :class:`hookspecs.RegisterKernel` does not take by name."""
    signature = inspect.signature(_add_kernel)

    def register(*args: Any, **kwargs: Any) -> None:
        try:
            signature.bind(result, info, *args, **kwargs)
        except TypeError as error:
            raise PluginError(
                f"{_describe(info)}: register_kernels' register(...): {error}; it takes keyword "
                "arguments: backend, op_type, kernel, and optionally domain, since, until, dtypes, check"
            ) from None
        _add_kernel(result, info, *args, **kwargs)

    return register


def _add_kernel(
    result: Registry,
    info: PluginInfo,
    *,
    backend: str,
    op_type: str,
    kernel: Callable[..., Any],
    domain: str = "",
    since: int = 1,
    until: int | None = None,
    dtypes: Collection[Any] | None = None,
    check: CheckFn | None = None,
) -> None:
    """The ``register`` of ``register_kernels`` (:class:`hookspecs.RegisterKernel`): adds the
    kernel to the table of this registry's instance of ``backend``, never to its class's."""
    label = f"{domain or 'ai.onnx'}::{op_type}-{since} on {backend}"
    if backend not in result.backends:
        raise PluginError(
            f"{_describe(info)} registers kernel {label}, but backend {backend!r} "
            f"{not_loaded('backend', backend)}; register kernels only for the names in the hook's "
            f"`backends` argument (loaded: {sorted(result.backends)})"
        )
    if (domain, op_type) not in result.operators:
        raise PluginError(
            f"{_describe(info)} registers kernel {label}, but no plugin registers operator "
            f"{domain or 'ai.onnx'}::{op_type}"
        )
    if not callable(kernel):
        raise PluginError(f"{_describe(info)} registers kernel {label} as {_short(kernel)}, not a function")
    instance = result.backends[backend]
    if "kernels" not in vars(instance):  # the first kernel a plugin adds to this instance
        instance.kernels = instance.kernels.extended()
    try:
        instance.kernels.register(op_type, domain, since, until, check, dtypes, origin=_describe(info))(
            kernel
        )
    except PluginError as error:  # say on which backend
        raise PluginError(f"{backend}: {error}") from None
    info.provides.setdefault("kernels", []).append(label)


def _store(
    result: Registry, existing: MutableMapping[str, Any], name: str, item: Any, kind: str, plugin: str
) -> None:
    _claim(result, existing, name, kind, plugin)
    existing[name] = item


def _claim(result: Registry, existing: MutableMapping[str, Any], name: str, kind: str, plugin: str) -> None:
    """Record ``plugin`` as the one registering ``name``; refuse a name already registered."""
    if name in existing:
        raise PluginError(
            f"plugin {plugin!r} registers {kind} {name!r}, which is already registered: "
            + _both(result, (kind, name), plugin)
        )
    result.owners[kind, name] = plugin


def _both(result: Registry, key: tuple[str, str], second: str) -> str:
    """Who registered ``key`` first, and who again."""
    first = result.owners.get(key)
    earlier = _describe(result._plugins[first]) if first is not None else "an earlier registration"
    return f"first by {earlier}, again by {_describe(result._plugins[second])}"
