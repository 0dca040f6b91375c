"""onnxruntime's Python API over SpawnML: existing applications run unchanged.

``import spawnml.onnxruntime as ort`` in place of ``import onnxruntime as ort``, or call
:func:`install` (or run ``python -m spawnml.onnxruntime SCRIPT``) so that ``import
onnxruntime`` itself resolves here. See ``docs/onnxruntime.md`` for what is honoured.
"""

from __future__ import annotations

from .. import __version__ as spawnml_version
from ..session import NodeArg
from . import capi
from .devices import (
    OrtAllocatorType,
    OrtArenaCfg,
    OrtDevice,
    OrtDeviceMemoryType,
    OrtDeviceVendorId,
    OrtMemoryInfo,
    OrtMemoryInfoDeviceType,
    OrtMemType,
    create_and_register_allocator,
    create_and_register_allocator_v2,
)
from .exceptions import (
    EngineError,
    EPFail,
    Fail,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    ModelLoaded,
    NoModel,
    NoSuchFile,
    NotImplemented,
    RuntimeException,
)
from .install import install, uninstall
from .iobinding import IOBinding
from .logging import set_default_logger_callback, set_default_logger_severity, set_default_logger_verbosity
from .options import ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions, SessionOptions
from .ortvalue import OrtValue
from .providers import (
    get_all_providers,
    get_available_providers,
    get_device,
    provider_map,
    set_provider_map,
)
from .session import InferenceSession, ModelMetadata

#: The onnxruntime API version this module follows (code that checks versions sees this one).
__version__ = "1.32.0"
version = __version__
package_name = "spawnml"
SessionIOBinding = IOBinding


def get_version_string() -> str:
    return __version__


def get_build_info() -> str:
    return f"SpawnML Build Info: spawnml {spawnml_version}, onnxruntime API {__version__}"


def set_seed(seed: int) -> None:
    """Kept as a no-op: SpawnML's inference operators are deterministic."""


def set_global_thread_pool_sizes(*args: object, **kwargs: object) -> None:
    """Kept as a no-op: SpawnML has no global pools to size."""


def disable_telemetry_events() -> None:
    """Kept as a no-op: SpawnML sends no telemetry."""


def enable_telemetry_events() -> None:
    """Kept as a no-op: SpawnML sends no telemetry."""


def preload_dlls(*args: object, **kwargs: object) -> None:
    """Kept as a no-op: there are no provider libraries to preload."""


__all__ = [
    "EPFail",
    "EngineError",
    "ExecutionMode",
    "ExecutionOrder",
    "Fail",
    "GraphOptimizationLevel",
    "IOBinding",
    "InferenceSession",
    "InvalidArgument",
    "InvalidGraph",
    "InvalidProtobuf",
    "ModelLoaded",
    "ModelMetadata",
    "NoModel",
    "NoSuchFile",
    "NodeArg",
    "NotImplemented",
    "OrtAllocatorType",
    "OrtArenaCfg",
    "OrtDevice",
    "OrtDeviceMemoryType",
    "OrtDeviceVendorId",
    "OrtMemType",
    "OrtMemoryInfo",
    "OrtMemoryInfoDeviceType",
    "OrtValue",
    "RunOptions",
    "RuntimeException",
    "SessionIOBinding",
    "SessionOptions",
    "__version__",
    "capi",
    "create_and_register_allocator",
    "create_and_register_allocator_v2",
    "disable_telemetry_events",
    "enable_telemetry_events",
    "get_all_providers",
    "get_available_providers",
    "get_build_info",
    "get_device",
    "get_version_string",
    "install",
    "package_name",
    "preload_dlls",
    "provider_map",
    "set_default_logger_callback",
    "set_default_logger_severity",
    "set_default_logger_verbosity",
    "set_global_thread_pool_sizes",
    "set_provider_map",
    "set_seed",
    "uninstall",
    "version",
]
