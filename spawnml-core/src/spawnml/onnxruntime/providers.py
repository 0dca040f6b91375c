"""onnxruntime's execution provider names, mapped onto SpawnML's backends.

Each onnxruntime provider name stands for one SpawnML backend. The defaults map every
provider onnxruntime knows to the nearest backend (the table in ``docs/onnxruntime.md``);
``SPAWNML_ORT_PROVIDERS`` (``"CUDAExecutionProvider=webgpu,OpenVINOExecutionProvider=cpu"``)
and :func:`set_provider_map` change it, the latter winning. A SpawnML backend name
(``"webgpu"``) is accepted as a provider too.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArgumentError, SpawnMLError
from .exceptions import error

ENVIRONMENT_VARIABLE = "SPAWNML_ORT_PROVIDERS"

#: The default backend of every provider; the first name given for a backend is the one
#: :func:`available_providers` reports for it.
DEFAULT_MAP: dict[str, str] = {
    "CPUExecutionProvider": "cpu",
    "CUDAExecutionProvider": "cuda",
    "WebGpuExecutionProvider": "webgpu",
    "OpenCLExecutionProvider": "opencl",
    # Vendor GPU providers: the backend that drives the same hardware.
    "TensorrtExecutionProvider": "cuda",
    "NvTensorRTRTXExecutionProvider": "cuda",
    "MIGraphXExecutionProvider": "opencl",
    "ROCMExecutionProvider": "opencl",
    "DmlExecutionProvider": "webgpu",  # Direct3D 12, which WebGPU uses on Windows
    "CoreMLExecutionProvider": "webgpu",  # Metal, which WebGPU uses on Apple machines
    "JsExecutionProvider": "webgpu",
    "WebNNExecutionProvider": "webgpu",
    # CPU libraries and NPUs SpawnML has no backend for: the CPU runs what they would.
    "OpenVINOExecutionProvider": "cpu",
    "DnnlExecutionProvider": "cpu",
    "XnnpackExecutionProvider": "cpu",
    "QNNExecutionProvider": "cpu",
    "NnapiExecutionProvider": "cpu",
    "VitisAIExecutionProvider": "cpu",
    "VSINPUExecutionProvider": "cpu",
    "RknpuExecutionProvider": "cpu",
    "CANNExecutionProvider": "cpu",
    "ACLExecutionProvider": "cpu",
    "ArmNNExecutionProvider": "cpu",
    "AzureExecutionProvider": "cpu",
}

#: The providers onnxruntime's ``get_all_providers`` lists, in its order.
ALL_PROVIDERS = [
    "TensorrtExecutionProvider",
    "CUDAExecutionProvider",
    "MIGraphXExecutionProvider",
    "OpenVINOExecutionProvider",
    "DnnlExecutionProvider",
    "VitisAIExecutionProvider",
    "QNNExecutionProvider",
    "NnapiExecutionProvider",
    "VSINPUExecutionProvider",
    "JsExecutionProvider",
    "CoreMLExecutionProvider",
    "DmlExecutionProvider",
    "RknpuExecutionProvider",
    "WebNNExecutionProvider",
    "WebGpuExecutionProvider",
    "XnnpackExecutionProvider",
    "CANNExecutionProvider",
    "AzureExecutionProvider",
    "CPUExecutionProvider",
]

_overrides: dict[str, str] = {}


def set_provider_map(mapping: Mapping[str, str] | None) -> None:
    """Map onnxruntime provider names to SpawnML backends for sessions created from now on.

    ``None`` forgets every earlier call, leaving the defaults and the environment variable.
    """
    if mapping is None:
        _overrides.clear()
        return
    for name, backend in mapping.items():
        if not isinstance(name, str) or not isinstance(backend, str) or not backend:
            raise InvalidArgumentError(
                f"provider map entries are name -> backend strings, not {name!r} -> {backend!r}"
            )
    _overrides.update(mapping)


def provider_map() -> dict[str, str]:
    """The map in force: the defaults, then ``SPAWNML_ORT_PROVIDERS``, then :func:`set_provider_map`."""
    return {**DEFAULT_MAP, **_environment_map(), **_overrides}


def _environment_map() -> dict[str, str]:
    text = os.environ.get(ENVIRONMENT_VARIABLE, "")
    entries = [entry.strip() for entry in text.split(",") if entry.strip()]
    mapped = {}
    for entry in entries:
        name, sep, backend = entry.partition("=")
        if not sep or not name.strip() or not backend.strip():
            raise InvalidArgumentError(f"{ENVIRONMENT_VARIABLE}: {entry!r} is not NAME=BACKEND")
        mapped[name.strip()] = backend.strip()
    return mapped


def backend_of(provider: str) -> str:
    """The SpawnML backend a provider name stands for (a backend name stands for itself)."""
    return provider_map().get(provider, provider)


def _usable_backends() -> list[str]:
    """Installed backends that have a device now."""
    from ..plugins import backends

    return [name for name, backend in backends().items() if backend.availability().available]


def available_providers() -> list[str]:
    """onnxruntime names of the usable backends, one each, the CPU last as onnxruntime lists it.

    A backend no provider name maps to is not listed (it is still accepted by its own name).
    """
    usable = set(_usable_backends())
    names: dict[str, str] = {}
    for name, backend in provider_map().items():
        if backend in usable:
            names.setdefault(backend, name)
    cpu = names.pop("cpu", None)
    return [*names.values(), *([cpu] if cpu else [])]


@dataclass
class Resolved:
    """The providers a session runs on: onnxruntime names, backends and options, in order."""

    names: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    options: list[dict[str, str]] = field(default_factory=list)


def resolve(
    providers: Sequence[Any] | None, provider_options: Sequence[Mapping[str, Any]] | None
) -> Resolved:
    """Parse onnxruntime's ``providers``/``provider_options`` into the backends to use.

    Names are strings or ``(name, options)`` pairs. As in onnxruntime, a provider whose backend
    is not usable here is warned about and skipped, and the CPU always ends the list, so a
    session runs whatever was asked for.
    """
    entries = provider_entries(providers, provider_options)
    usable = _usable_backends()
    resolved = Resolved()
    for name, options in entries:
        backend = backend_of(name)
        if backend not in usable:
            warnings.warn(
                f"Specified provider '{name}' is not in available provider names."
                f"Available providers: '{', '.join(available_providers())}'",
                UserWarning,
                stacklevel=4,
            )
            continue
        if backend in resolved.backends:  # two names for one backend: the first one's place counts
            continue
        resolved.names.append(name)
        resolved.backends.append(backend)
        resolved.options.append(options)
    if "cpu" not in resolved.backends and "cpu" in usable:
        resolved.names.append("CPUExecutionProvider")
        resolved.backends.append("cpu")
        resolved.options.append({})
    return resolved


def provider_entries(
    providers: Sequence[Any] | None, provider_options: Sequence[Mapping[str, Any]] | None
) -> list[tuple[str, dict[str, str]]]:
    """``(name, options)`` for each requested provider, options as strings (as onnxruntime keeps them)."""
    if providers is None:
        if provider_options:
            raise _bad_arguments("'provider_options' was given without 'providers'")
        return [("CPUExecutionProvider", {})]
    if isinstance(providers, str):
        raise _bad_arguments("'providers' must be a list of names, not a string")
    if not isinstance(providers, Sequence):
        raise _bad_arguments(f"'providers' should be a sequence, not {providers!r}")
    if provider_options is not None and (
        not isinstance(provider_options, Sequence)
        or not all(isinstance(o, Mapping) for o in provider_options)
    ):
        raise _bad_arguments(f"'provider_options' should be a sequence of dicts, not {provider_options!r}")
    if provider_options is not None and len(provider_options) != len(providers):
        raise _bad_arguments(
            "'providers' and 'provider_options' should be the same length if both are given."
        )
    entries = []
    for index, provider in enumerate(providers):
        if isinstance(provider, str):
            name, options = provider, dict(provider_options[index]) if provider_options else {}
        elif isinstance(provider, tuple | list) and len(provider) == 2 and isinstance(provider[0], str):
            if provider_options is not None:
                raise _bad_arguments(
                    "'provider_options' must not be given when 'providers' holds (name, options) pairs"
                )
            name, options = provider[0], dict(provider[1] or {})
        else:
            raise _bad_arguments(
                f"'providers' entries must be names or (name, options dict) pairs, not {provider!r}"
            )
        entries.append((name, {str(key): str(value) for key, value in options.items()}))
    return entries


def _bad_arguments(message: str) -> SpawnMLError:
    """A refusal of the provider arguments: onnxruntime raises ValueError for these."""
    return error(InvalidArgumentError, ValueError, message)


def check_and_normalize_provider_args(
    providers: Sequence[Any] | None,
    provider_options: Sequence[Mapping[Any, Any]] | None,
    available_provider_names: Sequence[str],
) -> tuple[list[str], list[dict[str, str]]]:
    """onnxruntime's helper: the provider names and their options as strings, checked; names not
    in ``available_provider_names`` are warned about, a name given again is warned about and dropped."""
    if providers is None:
        return [], []
    normalized: dict[str, dict[str, str]] = {}
    for name, options in provider_entries(providers, provider_options):
        if name not in available_provider_names:
            warnings.warn(
                f"Specified provider '{name}' is not in available provider names."
                f"Available providers: '{', '.join(available_provider_names)}'",
                UserWarning,
                stacklevel=2,
            )
        if name in normalized:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.", UserWarning, stacklevel=2)
            continue
        normalized[name] = options
    return list(normalized), list(normalized.values())


def known_provider(name: str) -> bool:
    """Whether ``name`` is an onnxruntime provider name or a backend name SpawnML knows."""
    from ..plugins import backends

    return name in provider_map() or name in ALL_PROVIDERS or name in backends()


def get_available_providers() -> list[str]:
    """onnxruntime's function: :func:`available_providers`."""
    return available_providers()


def get_all_providers() -> list[str]:
    """Every provider name onnxruntime knows; each maps to a SpawnML backend."""
    return list(ALL_PROVIDERS)


def get_device() -> str:
    """``"GPU"`` when CUDA's backend is usable and is not the CPU (as onnxruntime's GPU build says)."""
    backend = backend_of("CUDAExecutionProvider")
    return "GPU" if backend != "cpu" and backend in _usable_backends() else "CPU"
