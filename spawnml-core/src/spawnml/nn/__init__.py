"""``spawnml.nn``: modules, initialisation and the functional API, with torch.nn's names."""

from __future__ import annotations

from . import functional, init
from .modules import *  # noqa: F403  (the layers, listed in modules.__all__)
from .modules import __all__ as _modules
from .onnx_module import OnnxModule, from_onnx

__all__ = ["OnnxModule", "from_onnx", "functional", "init", *_modules]
