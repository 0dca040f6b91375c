"""``spawnml.nn``: modules, initialisation and the functional API, with torch.nn's names, and
``from_onnx`` for training imported models."""

from __future__ import annotations

from . import functional, init, utils
from .graph_module import GraphModule, from_onnx
from .modules import *  # noqa: F403  (the layers, listed in modules.__all__)
from .modules import __all__ as _modules

__all__ = ["GraphModule", "from_onnx", "functional", "init", "utils", *_modules]
