"""onnxruntime's ``SessionOptions``, ``RunOptions`` and option enums.

Every attribute and method onnxruntime 1.32 has is present. Those with a meaning for SpawnML
are honoured (see ``HONOURED``); the others are kept, so code that sets and reads them works,
and have no effect (``docs/onnxruntime.md`` lists both).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InvalidArgumentError
from ..passes import GraphOptimizationLevel as CoreLevel
from .exceptions import Fail, UnsupportedFeatureError, error
from .exceptions import NotImplemented as OrtNotImplemented


class _Enum(enum.IntEnum):
    """An enum that prints as onnxruntime's do (``GraphOptimizationLevel.ORT_ENABLE_ALL``)."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class GraphOptimizationLevel(_Enum):
    """onnxruntime's optimization levels, with its names and values."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(_Enum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(_Enum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


def core_level(level: int) -> CoreLevel:
    """SpawnML's level for onnxruntime's: the layout level has no passes of its own here."""
    level = int(level)
    if level == GraphOptimizationLevel.ORT_ENABLE_LAYOUT:
        return CoreLevel.ORT_ENABLE_EXTENDED
    try:
        return CoreLevel(level)
    except ValueError:
        raise InvalidArgumentError(f"unknown graph optimization level {level}") from None


#: Attributes of :class:`SessionOptions` that change what SpawnML does.
HONOURED = (
    "graph_optimization_level",
    "optimized_model_filepath",
    "enable_profiling",
    "profile_file_prefix",
    "intra_op_num_threads",
)


class SessionOptions:
    """onnxruntime's session options; see the module docstring for what each one does here."""

    def __init__(self) -> None:
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.enable_profiling = False
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = ExecutionOrder.DEFAULT
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.inter_op_num_threads = 0
        self.intra_op_num_threads = 0
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.optimized_model_filepath = ""
        self.profile_file_prefix = "onnxruntime_profile_"
        self.use_deterministic_compute = False
        self.use_per_session_threads = True
        self._config: dict[str, str] = {}
        self._free_dimensions: dict[str, int] = {}
        self._free_denotations: dict[str, int] = {}
        self._initializers: dict[str, Any] = {}
        self._providers: list[tuple[str, dict[str, str]]] = []

    # -- configuration entries ---------------------------------------------------------
    def add_session_config_entry(self, key: str, value: str) -> None:
        """Keep a configuration entry; SpawnML reads none of them."""
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        try:
            return self._config[key]
        except KeyError:
            # onnxruntime raises a plain RuntimeError here.
            raise error(
                InvalidArgumentError,
                RuntimeError,
                f"SessionOptions does not have configuration with key: {key}",
            ) from None

    # -- honoured -----------------------------------------------------------------------------
    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Fix a named symbolic dimension of the model's inputs to ``dim_value``."""
        self._free_dimensions[str(dim_name)] = int(dim_value)

    def add_free_dimension_override_by_denotation(self, dim_denotation: str, dim_value: int) -> None:
        """Kept; SpawnML's IR has no dimension denotations, so this has no effect."""
        self._free_denotations[str(dim_denotation)] = int(dim_value)

    def add_initializer(self, name: str, ort_value: Any) -> None:
        """Replace the model's initializer ``name`` with ``ort_value``'s data."""
        self._initializers[str(name)] = ort_value

    def add_external_initializers(self, names: Sequence[str], ort_values: Sequence[Any]) -> None:
        """Supply initializers whose data the model keeps outside; each replaces the named one."""
        if len(names) != len(ort_values):
            raise error(InvalidArgumentError, RuntimeError, "names and ort_values must be of the same length")
        for name, value in zip(names, ort_values, strict=True):
            self.add_initializer(name, value)

    def add_provider(self, provider_name: str, provider_options: dict[str, Any] | None = None) -> None:
        """Add a provider used when the session is given none."""
        self._providers.append((provider_name, {str(k): str(v) for k, v in (provider_options or {}).items()}))

    def has_providers(self) -> bool:
        return bool(self._providers)

    # -- refused ---------------------------------------------------------------------------------
    def register_custom_ops_library(self, library_path: str) -> None:
        """Refused: a custom operator library is native code for onnxruntime's kernel interface."""
        # onnxruntime raises Fail when a library cannot be loaded; code catching that sees it.
        raise error(
            UnsupportedFeatureError,
            Fail,
            f"custom operator library {library_path!r} cannot be loaded: SpawnML runs only the operators "
            "of its registry (add an operator through a SpawnML plugin instead)",
        )

    def add_external_initializers_from_files_in_memory(self, *args: Any) -> None:
        _refuse("add_external_initializers_from_files_in_memory")

    def add_provider_for_devices(self, *args: Any) -> None:
        _refuse("add_provider_for_devices (onnxruntime's plugin device API)")

    def set_provider_selection_policy(self, *args: Any) -> None:
        """Kept as a no-op: SpawnML chooses backends from the provider list alone."""

    def set_provider_selection_policy_delegate(self, *args: Any) -> None:
        """Kept as a no-op: SpawnML chooses backends from the provider list alone."""

    def set_ep_context_data_read_func(self, func: Callable[..., Any]) -> None:
        """Kept as a no-op: SpawnML has no EP context models."""

    def clear_ep_context_data_read_func(self) -> None:
        """Kept as a no-op: SpawnML has no EP context models."""

    def set_load_cancellation_flag(self, value: bool) -> None:
        """Kept as a no-op: loading is not interruptible here."""


class RunOptions:
    """onnxruntime's per-run options. ``terminate`` refuses runs that start while it is set."""

    def __init__(self) -> None:
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.only_execute_path_to_fetches = False
        self.terminate = False
        self.synchronize_execution_providers = True
        self.training_mode = False
        self._config: dict[str, str] = {}

    @property
    def run_tag(self) -> str:
        """Older onnxruntime's name of ``logid``."""
        return self.logid

    @run_tag.setter
    def run_tag(self, value: str) -> None:
        self.logid = value

    def add_run_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        try:
            return self._config[key]
        except KeyError:
            raise error(
                InvalidArgumentError, RuntimeError, f"RunOptions does not have configuration with key: {key}"
            ) from None

    def add_active_adapter(self, adapter: Any) -> None:
        _refuse("LoRA adapters (add_active_adapter)")


def _refuse(what: str) -> None:
    raise error(UnsupportedFeatureError, OrtNotImplemented, f"{what} is not supported by SpawnML")
