"""A wasi-nn host: WebAssembly programs load and run models through SpawnML.

:class:`WasiNnHost` answers the ``wasi_ephemeral_nn`` calls of one guest; :func:`run_guest` runs a
WASI program on Wasmtime with them linked in (``spawnml wasi run`` on the command line).
"""

from __future__ import annotations

from .abi import Errno, ExecutionTarget, GraphEncoding, TensorType
from .bounds import GuestBounds
from .host import WasiNnHost

__all__ = [
    "Errno",
    "ExecutionTarget",
    "GraphEncoding",
    "GuestBounds",
    "TensorType",
    "WasiNnHost",
    "run_guest",
]


def __getattr__(name: str) -> object:
    if name == "run_guest":  # Wasmtime is imported only when a guest is to run
        from .runner import run_guest

        return run_guest
    raise AttributeError(name)
