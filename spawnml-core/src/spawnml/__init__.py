"""SpawnML: run neural networks from any model file on whatever accelerator is at hand."""

from __future__ import annotations

__version__ = "0.1.0"

from . import dtypes, passes
from .errors import (
    BackendUnavailableError,
    ExecutionError,
    InvalidArgumentError,
    InvalidFeedError,
    InvalidGraphError,
    ModelLimitError,
    ModelLoadError,
    PluginError,
    SpawnMLError,
    UnknownFormatError,
    UnsafeExternalDataError,
    UnsupportedOperatorError,
)
from .formats import load
from .limits import Limits
from .session import InferenceSession, NodeArg, SessionOptions
from .tensor import Tensor

__all__ = [
    "BackendUnavailableError",
    "ExecutionError",
    "InferenceSession",
    "InvalidArgumentError",
    "InvalidFeedError",
    "InvalidGraphError",
    "Limits",
    "ModelLimitError",
    "ModelLoadError",
    "NodeArg",
    "PluginError",
    "SessionOptions",
    "SpawnMLError",
    "Tensor",
    "UnknownFormatError",
    "UnsafeExternalDataError",
    "UnsupportedOperatorError",
    "__version__",
    "dtypes",
    "load",
    "passes",
]
