"""onnxruntime's ``InferenceSession`` over :class:`spawnml.InferenceSession`.

The model is loaded here (so its metadata, free-dimension overrides and replaced
initializers can be applied to the IR), then planned by the core session on the
backends the onnxruntime provider names map to.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, InvalidFeedError, ModelLoadError, SpawnMLError
from ..formats import load
from ..ir import TENSOR, Graph
from ..passes import infer_shapes
from ..session import InferenceSession as CoreSession
from ..session import NodeArg, Output
from ..session import SessionOptions as CoreOptions
from ..tensor import Tensor
from .exceptions import Fail, NoSuchFile, RunTerminatedError, error, translated
from .feeds import string_feed, unaliased
from .iobinding import IOBinding
from .model_config import with_model_config
from .options import RunOptions, SessionOptions, core_level
from .ortvalue import OrtValue, ort_value
from .providers import Resolved, known_provider, provider_entries, resolve

#: Fields of an ONNX model kept in ``Graph.metadata`` beside its ``metadata_props``.
_MODEL_FIELDS = (
    "producer_name",
    "producer_version",
    "domain",
    "model_version",
    "doc_string",
    "ir_version",
    "format",
)


@dataclass(frozen=True)
class ModelMetadata:
    """onnxruntime's ``ModelMetadata``, from the model file's fields."""

    producer_name: str = ""
    graph_name: str = ""
    domain: str = ""
    description: str = ""
    graph_description: str = ""
    version: int = 0
    custom_metadata_map: dict[str, str] = field(default_factory=dict)


def model_metadata(graph: Graph) -> ModelMetadata:
    """The metadata onnxruntime reports; custom entries are those that are not model fields."""
    meta = graph.metadata
    version = meta.get("model_version", "")
    return ModelMetadata(
        producer_name=meta.get("producer_name", ""),
        graph_name=graph.name,
        domain=meta.get("domain", ""),
        description=meta.get("doc_string", ""),
        version=int(version) if version.lstrip("-").isdigit() else 0,
        custom_metadata_map={key: value for key, value in meta.items() if key not in _MODEL_FIELDS},
    )


class InferenceSession:
    """Load a model and run it, with onnxruntime's constructor and methods."""

    def __init__(
        self,
        path_or_bytes: str | bytes | os.PathLike[str],
        sess_options: SessionOptions | None = None,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        # kwargs onnxruntime accepts (disabled_optimizers, read_config_from_model) change nothing here.
        self._kwargs = kwargs
        if isinstance(path_or_bytes, bytes | bytearray | memoryview):
            self._model_path: str | None = None
            self._model_bytes: bytes | None = bytes(path_or_bytes)
        elif isinstance(path_or_bytes, str | os.PathLike):
            self._model_path, self._model_bytes = os.fspath(path_or_bytes), None
        else:
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._create(providers, provider_options)

    def _create(
        self, providers: Sequence[Any] | None, provider_options: Sequence[Mapping[str, Any]] | None
    ) -> None:
        options = self._sess_options
        if providers is None and options.has_providers():
            providers, provider_options = (
                [name for name, _ in options._providers],
                [o for _, o in options._providers],
            )
        with translated():
            self._resolved: Resolved = resolve(providers, provider_options)
            graph = self._load()
            options = self._sess_options = with_model_config(options, graph)
            self._metadata = model_metadata(graph)
            self._overridable = [
                NodeArg(value.name, _type(value.dtype), list(value.shape or ()))
                for value in graph.inputs
                if value.name in graph.initializers
            ]
            core_options = CoreOptions(
                graph_optimization_level=core_level(options.graph_optimization_level),
                optimized_model_filepath=options.optimized_model_filepath,
                enable_profiling=bool(options.enable_profiling),
                profile_file_prefix=options.profile_file_prefix,
                intra_op_num_threads=options.intra_op_num_threads,
                inter_op_num_threads=options.inter_op_num_threads,
            )
            self._sess = CoreSession(graph, core_options, self._resolved.backends)
        self._inputs = {value.name: value for value in self._sess.graph.inputs}
        self._required = [arg.name for arg in self._sess.get_inputs()]
        self._outputs = _inferred_outputs(self._sess)

    def _load(self) -> Graph:
        """The model's IR with the options' free dimensions and initializers applied."""
        if self._model_path is not None and not Path(self._model_path).exists():
            raise error(
                ModelLoadError, NoSuchFile, f"Load model from {self._model_path} failed. File doesn't exist"
            )
        graph = load(self._model_path if self._model_path is not None else self._model_bytes or b"")
        fixed = self._sess_options._free_dimensions
        if fixed:
            graph.inputs = [
                replace(value, shape=tuple(fixed.get(d, d) if isinstance(d, str) else d for d in value.shape))
                if value.shape is not None
                else value
                for value in graph.inputs
            ]
        for name, value in self._sess_options._initializers.items():
            if name not in graph.initializers:
                raise InvalidArgumentError(f"add_initializer: the model has no initializer {name!r}")
            array = value.numpy() if isinstance(value, OrtValue) else np.asarray(value)
            graph.initializers[name] = np.asarray(array)
        return graph

    # -- metadata ---------------------------------------------------------------------------
    def get_inputs(self) -> list[NodeArg]:
        return self._sess.get_inputs()

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        return list(self._overridable)

    def get_modelmeta(self) -> ModelMetadata:
        return self._metadata

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    def get_providers(self) -> list[str]:
        return list(self._resolved.names)

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        return {
            name: dict(options)
            for name, options in zip(self._resolved.names, self._resolved.options, strict=True)
        }

    def set_providers(
        self,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Plan the model again on other providers (the current ones when None); a name neither
        onnxruntime nor SpawnML knows is refused, as onnxruntime refuses it here."""
        if providers is None:
            providers, provider_options = self._resolved.names, self._resolved.options
        for name, _ in provider_entries(providers, provider_options):
            if not known_provider(name):
                raise error(InvalidArgumentError, RuntimeError, f"Unknown Provider Type: {name}")
        self._sess.close()
        self._create(providers, provider_options)

    def disable_fallback(self) -> None:
        """Kept as a no-op: SpawnML never retries on other providers."""

    def enable_fallback(self) -> None:
        """Kept as a no-op: SpawnML never retries on other providers."""

    # -- running ----------------------------------------------------------------------------
    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: RunOptions | None = None,
    ) -> list[Any]:
        """Run on host data; returns numpy arrays (lists for sequences, None for empty optionals)."""
        feeds = self._feeds(input_feed, run_options)
        with translated():
            return unaliased(self._sess.run(output_names or None, feeds), feeds)

    def run_with_ort_values(
        self,
        output_names: Sequence[str] | None,
        input_dict_ort_values: Mapping[str, OrtValue],
        run_options: RunOptions | None = None,
    ) -> list[OrtValue]:
        """Run on OrtValues; outputs stay on the device that computed them."""
        return [
            ort_value(output) for output in self.run_tensors(output_names, input_dict_ort_values, run_options)
        ]

    def run_tensors(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: RunOptions | None = None,
    ) -> list[Output]:
        """Run and keep outputs where they were computed (used by IOBinding)."""
        feeds = self._feeds(input_feed, run_options)
        with translated():
            return self._sess.run_with_tensors(output_names or None, feeds)

    def run_async(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        callback: Callable[[Any, Any, str], None],
        user_data: Any,
        run_options: RunOptions | None = None,
    ) -> None:
        """Run on another thread, then call ``callback(outputs, user_data, error_text)``."""

        def work() -> None:
            try:
                outputs = self.run(output_names, input_feed, run_options)
            except Exception as failure:  # the callback is told, as onnxruntime does
                callback(None, user_data, str(failure))
                return
            callback(outputs, user_data, "")

        threading.Thread(target=work, name="spawnml-ort-run-async", daemon=True).start()

    def io_binding(self) -> IOBinding:
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: IOBinding, run_options: RunOptions | None = None) -> None:
        iobinding.run(self, run_options)

    # -- profiling -------------------------------------------------------------------------
    def end_profiling(self) -> str:
        return self._sess.end_profiling()

    def get_profiling_start_time_ns(self) -> int:
        return self._sess.get_profiling_start_time_ns()

    # -- helpers ----------------------------------------------------------------------------
    def _feeds(self, input_feed: Mapping[str, Any], run_options: RunOptions | None) -> dict[str, Any]:
        """Feeds as the core session takes them, checked as onnxruntime checks them first."""
        if run_options is not None and run_options.terminate:
            raise error(RunTerminatedError, Fail, "Exiting due to terminate flag being set to true.")
        missing = [name for name in self._required if name not in input_feed]
        if missing:
            # onnxruntime raises a plain ValueError for this one check.
            raise error(
                InvalidFeedError,
                ValueError,
                f"Required inputs ({missing}) are missing from input feed ({list(input_feed)}).",
            )
        return {name: self._feed(name, value) for name, value in input_feed.items()}

    def _feed(self, name: str, feed: Any) -> Any:
        if isinstance(feed, OrtValue):
            return feed.value
        declared = self._inputs.get(name)
        if isinstance(feed, np.ndarray) and feed.dtype.kind in "USV" and _is_string(declared):
            return string_feed(feed)
        if isinstance(feed, np.ndarray | Tensor | list | tuple) and not _plain_list(
            feed, self._inputs.get(name)
        ):
            return feed
        if declared is None or declared.kind != TENSOR or declared.dtype is None:
            return feed
        # onnxruntime converts Python numbers and lists to the input's declared element type.
        try:
            return np.asarray(feed, dtype=declared.dtype)
        except (TypeError, ValueError):
            return feed


def _inferred_outputs(session: CoreSession) -> list[NodeArg]:
    """The outputs, their unknown types and dimensions filled in by shape inference as onnxruntime does."""
    declared = session.get_outputs()
    if all(arg.shape and None not in arg.shape and "unknown" not in arg.type for arg in declared):
        return declared
    try:
        types = infer_shapes(session.graph)
    except SpawnMLError:  # inference is a nicety here: keep what the model declares
        return declared
    filled = []
    for arg in declared:
        found = types.get(arg.name)
        if found is None or found.shape is None or not arg.type.startswith("tensor("):
            filled.append(arg)
            continue
        shape = (
            list(found.shape)
            if not arg.shape
            else [
                known if dim is None and known is not None else dim
                for dim, known in zip(arg.shape, list(found.shape), strict=False)
            ]
        )
        kind = _type(found.dtype) if "unknown" in arg.type and found.dtype is not None else arg.type
        filled.append(NodeArg(arg.name, kind, shape))
    return filled


def _is_string(declared: Any) -> bool:
    """Whether the declared input is a tensor of strings (held as objects)."""
    return declared is not None and declared.kind == TENSOR and declared.dtype == np.dtype(object)


def _plain_list(feed: Any, declared: Any) -> bool:
    """Whether ``feed`` is a Python list meant as a tensor (the input is not a sequence)."""
    return isinstance(feed, list | tuple) and declared is not None and declared.kind == TENSOR


def _type(dtype: Any) -> str:
    from .. import dtypes

    return dtypes.type_string(dtype)
