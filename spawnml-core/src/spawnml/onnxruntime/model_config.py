"""Session options read from the model, as onnxruntime reads them when ``ORT_LOAD_CONFIG_FROM_MODEL``
is ``1``: the ``ort_config`` metadata entry, JSON with a ``session_options`` object."""

from __future__ import annotations

import copy
import json
import os
from typing import Any

from ..errors import InvalidArgumentError
from ..ir import Graph
from .exceptions import error
from .options import ExecutionMode, GraphOptimizationLevel, SessionOptions

ENVIRONMENT_VARIABLE = "ORT_LOAD_CONFIG_FROM_MODEL"
METADATA_KEY = "ort_config"

#: The session options onnxruntime takes from a model, each an integer, and what it becomes.
_READ: dict[str, Any] = {
    "intra_op_num_threads": int,
    "inter_op_num_threads": int,
    "execution_mode": ExecutionMode,
    "graph_optimization_level": GraphOptimizationLevel,
    "enable_profiling": bool,
}


def with_model_config(options: SessionOptions, graph: Graph) -> SessionOptions:
    """``options``, or where the environment asks and the model has a configuration, a copy of
    them with the model's settings (others in it are ignored, as onnxruntime ignores them)."""
    text = graph.metadata.get(METADATA_KEY)
    if os.environ.get(ENVIRONMENT_VARIABLE) != "1" or text is None:
        return options
    try:
        settings = json.loads(text).get("session_options", {})
    except (ValueError, AttributeError):
        raise error(
            InvalidArgumentError, RuntimeError, f"the model's {METADATA_KEY} is not a JSON object"
        ) from None
    configured = copy.copy(options)
    for name, convert in _READ.items():
        if name not in settings:
            continue
        value = settings[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise error(
                InvalidArgumentError,
                RuntimeError,
                f"{name} option in the model file must be an integer, not {value!r}",
            )
        setattr(configured, name, convert(value))
    return configured
