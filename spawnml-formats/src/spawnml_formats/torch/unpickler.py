"""A pickle reader that only knows the few globals a checkpoint of tensors needs.

:data:`ALLOWED` maps each permitted ``(module, name)`` to SpawnML's own stand-in; nothing
is ever imported, and any other global (``os.system``, ``builtins.eval``...) is refused
with :class:`UnsafePickleError` before it could be called. Persistent ids must name
storages, which become :class:`~.storages.Storage` records.

Each pickle is read through once with :mod:`pickletools` before it is loaded: every opcode's
argument must lie within the file, and a memo index may not run ahead of the objects memoised
so far. CPython's unpickler grows its memo to twice the largest index it is given, zeroing it
as it goes, so a single forged ``LONG_BINPUT`` of 2^31 would otherwise cost 32 GiB.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from collections import OrderedDict
from typing import Any, cast

from spawnml import Limits, ModelLoadError

from .storages import STORAGE_DTYPES, Storage, StorageType, rebuild_parameter, rebuild_tensor

ALLOWED: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): OrderedDict,
    ("torch._utils", "_rebuild_tensor"): rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): rebuild_parameter,
    **{("torch", name): StorageType(name) for name in STORAGE_DTYPES},
}


class UnsafePickleError(ModelLoadError):
    """A checkpoint's pickle names a global outside the allow-list; nothing was imported or run."""

    def __init__(self, module: str, name: str, where: str) -> None:
        self.module, self.name = module, name
        super().__init__(
            f"{where} asks for the global {module}.{name}, which is not on SpawnML's allow-list of "
            "checkpoint types; refused without importing or calling it (the file may run code "
            "under torch.load(weights_only=False): load it only if you trust it)"
        )


class CheckpointUnpickler(pickle.Unpickler):
    """Reads one pickle from a checkpoint, resolving only :data:`ALLOWED` globals."""

    def __init__(self, stream: io.BytesIO, storages: dict[str, Storage], limits: Limits, where: str) -> None:
        super().__init__(stream)
        self.storages, self.limits, self.where = storages, limits, where

    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED[module, name]
        except KeyError:
            raise UnsafePickleError(module, name, self.where) from None

    def persistent_load(self, pid: Any) -> Storage:
        """A storage named by ``('storage', type, key, location, numel[, view])``."""
        if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"):
            raise ModelLoadError(f"{self.where} has a persistent id {pid!r:.200}, not a storage")
        _, kind, key, _, numel, *view = pid
        if not isinstance(kind, StorageType) or not isinstance(numel, int) or not isinstance(key, str | int):
            raise ModelLoadError(f"{self.where} has a malformed storage id {pid!r:.200}")
        if view and view[0] is not None:
            raise ModelLoadError(
                f"{self.where} uses storage views (torch before 0.4), which SpawnML does not read"
            )
        self.limits.check("tensor elements", numel, self.limits.max_tensor_elements, f"storage {key!r}")
        storage = self.storages.setdefault(str(key), Storage(str(key), kind.dtype, numel))
        if storage.dtype != kind.dtype or storage.numel != numel:
            raise ModelLoadError(f"{self.where} describes storage {key!r} twice, differently")
        return storage


#: Opcodes that store the top of the stack in the memo at the index they give.
MEMO_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})


def check_opcodes(stream: io.BytesIO, where: str) -> None:
    """Walk the next pickle in ``stream`` without building anything, refusing forged memo indices."""
    start, memoised = stream.tell(), 0
    for opcode, argument, _ in pickletools.genops(stream):
        if opcode.name in MEMO_PUTS:
            argument = cast(int, argument)  # a memo index: these opcodes carry an int
            if argument > memoised:
                raise ModelLoadError(
                    f"{where} has a pickle storing memo entry {argument:,} after only {memoised:,} "
                    "objects were memoised"
                )
            memoised += argument == memoised
        elif opcode.name == "MEMOIZE":
            memoised += 1
    stream.seek(start)


def unpickle(stream: io.BytesIO, storages: dict[str, Storage], limits: Limits, where: str) -> Any:
    """The next object pickled in ``stream``; storages it names are added to ``storages``."""
    try:
        check_opcodes(stream, where)
        return CheckpointUnpickler(stream, storages, limits, where).load()
    except ModelLoadError:
        raise
    except Exception as error:  # a corrupt or hostile pickle fails in many ways; all mean "invalid"
        raise ModelLoadError(
            f"{where} is not a valid checkpoint pickle: {type(error).__name__}: {error}"
        ) from error
