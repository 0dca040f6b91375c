"""SpawnML: run neural networks from any model file on whatever accelerator is at hand."""

# ruff: noqa: F405  (__all__ names the lazy API too, which type checkers see through the star import)

from __future__ import annotations

import sys
from importlib import import_module
from importlib.util import find_spec
from types import ModuleType
from typing import TYPE_CHECKING, Any

from . import discovery
from .errors import (
    AutogradError,
    BackendUnavailableError,
    DeviceError,
    DeviceLostError,
    DeviceMemoryError,
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
from .version import __version__

# The layers below the plugins find what they registered through ``discovery``, which imports this
# package's ``plugins`` when first asked, not here.
discovery.install(lambda: import_module(".plugins", __name__))

if TYPE_CHECKING:
    from . import dtypes
    from ._tensor_api import *  # noqa: F403
    from .dtypes import bfloat16
    from .formats import load
    from .limits import Limits
    from .session import InferenceSession, NodeArg, SessionOptions

#: The public names of the inference API, imported on first use from the module defining them,
#: so that importing one module of the package (``spawnml.ir``) loads only what that one needs.
_DEFINED_IN = {
    "InferenceSession": "session",
    "NodeArg": "session",
    "SessionOptions": "session",
    "load": "formats",
    "Limits": "limits",
}


class _Package(ModuleType):
    """The package's module type: importing the ``spawnml.tensor`` submodule leaves the public
    name ``tensor`` to the function, which ``__getattr__`` binds."""

    def __setattr__(self, name: str, value: Any) -> None:
        if not (name == "tensor" and isinstance(value, ModuleType)):
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "AutogradError",
    "BackendUnavailableError",
    "DeviceError",
    "DeviceLostError",
    "DeviceMemoryError",
    "ExecutionError",
    "Function",
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
    "abs",
    "add",
    "amax",
    "amin",
    "arange",
    "argmax",
    "argmin",
    "autograd",
    "bfloat16",
    "bool",
    "cat",
    "ceil",
    "chunk",
    "clamp",
    "clip",
    "cos",
    "cumsum",
    "div",
    "dtypes",
    "empty",
    "enable_grad",
    "eq",
    "erf",
    "exp",
    "expand",
    "expm1",
    "flatten",
    "float16",
    "float32",
    "float64",
    "floor",
    "from_numpy",
    "full",
    "full_like",
    "gather",
    "ge",
    "get_rng_state",
    "gt",
    "index_add",
    "index_select",
    "int8",
    "int16",
    "int32",
    "int64",
    "is_grad_enabled",
    "isnan",
    "le",
    "load",
    "load_checkpoint",
    "load_safetensors",
    "log",
    "log1p",
    "log_softmax",
    "logical_and",
    "logical_not",
    "logical_or",
    "logsumexp",
    "lt",
    "manual_seed",
    "masked_fill",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mm",
    "mul",
    "narrow",
    "ne",
    "neg",
    "nn",
    "no_grad",
    "norm",
    "ones",
    "ones_like",
    "optim",
    "passes",
    "permute",
    "pow",
    "rand",
    "randint",
    "randn",
    "randperm",
    "reciprocal",
    "relu",
    "reshape",
    "round",
    "rsqrt",
    "save_checkpoint",
    "save_safetensors",
    "scatter",
    "scatter_add",
    "set_grad_enabled",
    "set_rng_state",
    "sigmoid",
    "sign",
    "sin",
    "softmax",
    "split",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "std",
    "sub",
    "sum",
    "t",
    "tanh",
    "tensor",
    "transpose",
    "trunc",
    "uint8",
    "unbind",
    "unsqueeze",
    "utils",
    "var",
    "where",
    "zeros",
    "zeros_like",
]


def __getattr__(name: str) -> Any:
    """The public names not imported above, loaded on first use so that ``import spawnml`` and an
    inference session stay quick: the inference API, the tensor functions, autograd, nn and optim,
    and the package's submodules."""
    if name == "bfloat16":
        return import_module(".dtypes", __name__).bfloat16  # imports ml_dtypes, for narrow types only
    if name in _DEFINED_IN:
        globals()[name] = getattr(import_module(f".{_DEFINED_IN[name]}", __name__), name)
    elif name in __all__ and name != "dtypes":
        # Importing the API imports autograd, which defines Tensor's math methods: whoever holds
        # ``spawnml.Tensor`` can use its operators.
        api = import_module("._tensor_api", __name__)
        globals().update({public: getattr(api, public) for public in __all__ if hasattr(api, public)})
        if name not in globals():  # asked while the API module is still importing its submodules
            raise AttributeError(f"module {__name__!r} has no attribute {name!r} yet")
    elif find_spec(f"{__name__}.{name}") is not None:
        import_module(f".{name}", __name__)  # binds the submodule here
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return globals()[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
