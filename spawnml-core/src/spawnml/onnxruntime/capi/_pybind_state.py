"""``onnxruntime.capi._pybind_state``: the same names as ``onnxruntime_pybind11_state``."""

from __future__ import annotations

from .onnxruntime_pybind11_state import *  # noqa: F403 - the module is an alias, as in onnxruntime
from .onnxruntime_pybind11_state import __all__ as __all__
