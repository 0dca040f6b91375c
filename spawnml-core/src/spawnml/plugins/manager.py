"""Loading plugins from entry points and collecting what they register."""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
from collections.abc import Callable, Collection
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
from .hookspecs import Command

ENTRY_POINT_GROUP = "spawnml"
#: Comma-separated entry-point names (or distribution names) to load; unset loads all.
PLUGINS_ENV = "SPAWNML_PLUGINS"
#: Core's own plugins, registered through the same hooks as everybody else's.
BUILTIN_PLUGINS = ("spawnml.ops.builtin",)


@dataclass
class PluginInfo:
    """One loaded plugin: where it comes from and what it registered."""

    name: str
    distribution: str = ""
    version: str = ""
    builtin: bool = False
    provides: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Registry:
    """Everything the loaded plugins registered."""

    backends: dict[str, Backend] = field(default_factory=dict)
    formats: dict[str, FormatLoader] = field(default_factory=dict)
    operators: OperatorRegistry = field(default_factory=OperatorRegistry)
    models: dict[str, ModelSpec] = field(default_factory=dict)
    reference_models: dict[str, ReferenceModel] = field(default_factory=dict)
    commands: dict[str, Any] = field(default_factory=dict)
    plugins: dict[str, PluginInfo] = field(default_factory=dict)
    #: (kind, name) -> the plugin that registered it, to name both sides of a duplicate.
    owners: dict[tuple[str, str], str] = field(default_factory=dict)


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
        result.plugins[name] = PluginInfo(
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
        "register_models": _named("models", "model", ModelSpec),
        "register_reference_models": _named("reference_models", "reference model", ReferenceModel),
        "register_commands": _named("commands", "command", Command),
    }
    for hook_name, add in adders.items():
        for impl in getattr(manager.hook, hook_name).get_hookimpls():
            info = result.plugins[impl.plugin_name]

            def register(item: Any, _info: PluginInfo = info, _add=add, _hook=hook_name) -> None:
                label = _add(result, _info.name, item)
                _info.provides.setdefault(_hook.removeprefix("register_"), []).append(label)

            _call_hook(impl, info, hook_name, register=register)
    for impl in manager.hook.register_kernels.get_hookimpls():  # after the backends they extend
        info = result.plugins[impl.plugin_name]
        registrar = _kernel_registrar(result, info)
        _call_hook(impl, info, "register_kernels", register=registrar, backends=frozenset(result.backends))
    return result


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
            raise PluginError(
                f"{_describe(result.plugins[impl.plugin_name])} implements unknown hook {hook_name!r}{hint}; "
                f"the hooks are {', '.join(known)}"
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
    """An adder for instances of ``expected`` kept by their ``name`` in ``Registry.<field>``."""

    def add(result: Registry, plugin: str, item: Any) -> str:
        if not isinstance(item, expected):
            raise PluginError(f"plugin {plugin!r} registered {item!r}, not a {expected.__name__}")
        _store(result, getattr(result, field), item.name, item, kind, plugin)
        return item.name

    return add


def _add_backend(result: Registry, plugin: str, backend_class: Any) -> str:
    if not (isinstance(backend_class, type) and issubclass(backend_class, Backend)):
        raise PluginError(f"plugin {plugin!r} registered {backend_class!r}, not a Backend subclass")
    if inspect.isabstract(backend_class) or not getattr(backend_class, "name", ""):
        raise PluginError(
            f"plugin {plugin!r} registered {backend_class.__name__}, which is abstract or has no name"
        )
    _store(result, result.backends, backend_class.name, backend_class(), "backend", plugin)
    return backend_class.name


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


def _store(result: Registry, existing: dict[str, Any], name: str, item: Any, kind: str, plugin: str) -> None:
    if name in existing:
        raise PluginError(
            f"plugin {plugin!r} registers {kind} {name!r}, which is already registered: "
            + _both(result, (kind, name), plugin)
        )
    existing[name] = item
    result.owners[kind, name] = plugin


def _both(result: Registry, key: tuple[str, str], second: str) -> str:
    """Who registered ``key`` first, and who again."""
    first = result.owners.get(key)
    earlier = _describe(result.plugins[first]) if first is not None else "an earlier registration"
    return f"first by {earlier}, again by {_describe(result.plugins[second])}"
