"""Run a guest on Wasmtime with WASI and SpawnML's wasi-nn calls linked in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import wasmtime
from spawnml.errors import InvalidArgumentError, SpawnMLError

from .abi import MODULE, Errno
from .host import WasiNnHost
from .memory import WasmtimeMemory


class GuestTrapError(SpawnMLError):
    """The guest stopped on a trap (an unreachable instruction, an out-of-bounds access)."""


def define_wasi_nn(linker: wasmtime.Linker, host: WasiNnHost) -> None:
    """Link ``wasi_ephemeral_nn``'s calls to ``host``, each reading the calling guest's ``memory``."""
    for name, arity in host.CALLS.items():
        kind = wasmtime.FuncType([wasmtime.ValType.i32()] * arity, [wasmtime.ValType.i32()])
        linker.define_func(MODULE, name, kind, _bound(getattr(host, name)), access_caller=True)


def _bound(call: Callable[..., int]) -> Callable[..., int]:
    def imported(caller: wasmtime.Caller, *args: int) -> int:
        memory = caller.get("memory")
        if not isinstance(memory, wasmtime.Memory):
            return int(Errno.MISSING_MEMORY)
        return int(call(WasmtimeMemory(memory, caller), *args))

    return imported


def run_guest(
    guest: str | Path,
    host: WasiNnHost,
    args: Sequence[str] = (),
    *,
    dirs: Sequence[tuple[str, str]] = (),
) -> int:
    """Run the WASI program ``guest`` (``_start``) to its end and return its exit code.

    ``dirs`` are (host directory, guest path) pairs the guest may open; standard input, output
    and error are the host process's. The guest's memory is bounded by the host's bounds.
    """
    path = Path(guest)
    if not path.is_file():
        raise InvalidArgumentError(f"no WebAssembly program at {str(path)!r}")
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    store.set_limits(memory_size=host.bounds.max_memory_bytes)
    store.set_wasi(_wasi_config(path, args, dirs))
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    define_wasi_nn(linker, host)
    try:
        module = wasmtime.Module.from_file(engine, str(path))
        start: Any = linker.instantiate(store, module).exports(store)["_start"]
    except (wasmtime.WasmtimeError, KeyError) as error:
        raise InvalidArgumentError(f"{path}: not a runnable WASI program: {error}") from None
    try:
        start(store)
    except wasmtime.ExitTrap as exit_:
        return int(exit_.code)
    except wasmtime.Trap as trap:
        raise GuestTrapError(f"{path}: the guest trapped: {trap.message}") from None
    return 0


def _wasi_config(path: Path, args: Sequence[str], dirs: Sequence[tuple[str, str]]) -> wasmtime.WasiConfig:
    config = wasmtime.WasiConfig()
    config.argv = [path.name, *args]
    config.inherit_stdin()
    config.inherit_stdout()
    config.inherit_stderr()
    for host_dir, guest_dir in dirs:
        if not Path(host_dir).is_dir():
            raise InvalidArgumentError(f"--dir {host_dir!r}: no such directory")
        config.preopen_dir(host_dir, guest_dir)
    return config
