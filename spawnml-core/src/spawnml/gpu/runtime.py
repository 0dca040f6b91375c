"""What a GPU backend implements: its device, an allocator pooled by size, and programs.

Programs are compiled once per source and launched in order; nothing here waits for the
device except :meth:`Runtime.copy_out`. One runtime serves every session and thread on its
backend: the pool, the program cache and the counters sit behind :attr:`Runtime.lock`, which
subclasses also take around their own queue state.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import count
from typing import Any

import numpy as np

from ..errors import DeviceLostError, DeviceMemoryError, PluginError

#: Every allocation is a multiple of this many bytes (and at least this many).
ALIGN = 16
#: Past this size, buffers come in eight sizes per power of two (at most 12.5% unused).
SMALL = 64 << 10
#: How many sizes up a pooled buffer may be to serve a request (four: at most about 60% unused).
REACH = 4
#: Bytes of free buffers a pool keeps for reuse; past it, the longest unused are released.
POOL_BYTES = 256 << 20


class Fault(Enum):
    """A device failure :meth:`Runtime.inject` forces; for tests only."""

    OUT_OF_MEMORY = "out of memory"
    DEVICE_LOST = "device lost"


@dataclass(frozen=True)
class MemoryStats:
    """The device memory a runtime holds: bytes in use, bytes pooled for reuse, and buffers."""

    live: int
    pooled: int
    buffers: int


class Runtime(ABC):
    """One device. Subclasses allocate, copy, compile and launch; pooling and caching live here."""

    #: Bytes of free buffers kept for reuse (see :data:`POOL_BYTES`).
    pool_bytes = POOL_BYTES
    #: Whether kernels may compute in float64 (the device has double precision).
    float64 = False
    #: Whether the device is a CPU (a software rasterizer, PoCL): kernels may then pick variants
    #: without workgroup memory, which such devices run as loops switched at every barrier.
    on_cpu = False

    def __init__(self) -> None:
        self.lock = threading.RLock()
        #: Why the device is lost, once it is; every later use raises :class:`DeviceLostError`.
        self.lost = ""
        self._free: OrderedDict[int, tuple[int, Any]] = OrderedDict()  # token -> (size, handle), oldest first
        self._by_size: dict[int, list[int]] = defaultdict(list)  # size -> tokens, oldest first
        self._tokens = count()
        self._live = self._pooled = self._buffers = 0
        self._programs: dict[str, Any] = {}
        self._fault: Fault | None = None
        self._fault_after = 0

    # Device.
    @abstractmethod
    def describe(self) -> str:
        """The device's name and kind, for messages and ``device_name()``."""

    @property
    @abstractmethod
    def max_groups(self) -> int:
        """The most workgroups one launch may have along one grid dimension."""

    @property
    @abstractmethod
    def max_buffer_bytes(self) -> int:
        """The largest buffer a kernel may bind."""

    @property
    def max_alloc_bytes(self) -> int:
        """The largest buffer the device allocates; kernels bind windows of buffers past
        :attr:`max_buffer_bytes` (see :meth:`window`)."""
        return self.max_buffer_bytes

    @property
    def max_bindings(self) -> int:
        """The most buffers one kernel may bind (a tensor bound in windows takes one per window)."""
        return 1 << 16

    @property
    def window_alignment(self) -> int:
        """The byte alignment of a window's start."""
        return 1

    def window(self, handle: Any, offset: int, nbytes: int) -> Any:
        """What a kernel binds for ``nbytes`` of ``handle`` from byte ``offset``. Runtimes whose
        buffers never outgrow one binding bind whole buffers only."""
        raise PluginError(f"{self.describe()} binds whole buffers only, not windows of them")

    def check_alive(self) -> None:
        """Raise :class:`DeviceLostError` once the device is lost, so nothing waits on it."""
        if self.lost:
            raise DeviceLostError(
                f"the device {self.describe()} was lost ({self.lost}); create a new session"
            )

    def lose(self, reason: str) -> DeviceLostError:
        """Record that the device is lost (subclasses call it on the library's report); the error to raise."""
        self.lost = self.lost or reason
        return DeviceLostError(f"the device {self.describe()} was lost ({self.lost}); create a new session")

    # Memory.
    def alloc(self, nbytes: int) -> tuple[Any, int]:
        """A device buffer of at least ``nbytes`` and its size: a pooled one of its size class or up
        to :data:`REACH` classes above, else a new one."""
        size = size_class(nbytes)
        if size > self.max_buffer_bytes >= nbytes:
            size = max(ALIGN, -(-nbytes // ALIGN) * ALIGN)
        with self.lock:
            self.check_alive()
            pooled = self._pooled_size(size)
            if pooled:
                handle = self._free.pop(self._by_size[pooled].pop())[1]
                self._pooled -= pooled
                size = pooled
            else:
                handle = self._new(size)
            self._live += size
        return handle, size

    def adopt(self, nbytes: int) -> int:
        """Count a buffer allocated elsewhere as live (see :meth:`Storage.adopt`); its size."""
        with self.lock:
            self.check_alive()
            self._live += nbytes
            self._buffers += 1
        return nbytes

    def _pooled_size(self, size: int) -> int:
        """The smallest size class from ``size`` up with a pooled buffer, within reach; 0 if none."""
        for _ in range(REACH + 1):
            if self._by_size.get(size):
                return size
            size = size_class(size + 1)
        return 0

    def free(self, handle: Any, size: int, reuse: bool = True) -> None:
        """Give a buffer back: to the pool, or released if not ``reuse``; queued work on it still runs."""
        with self.lock:
            self._live -= size
            if not reuse or self.lost:
                self._buffers -= 1
                return
            token = next(self._tokens)
            self._free[token] = (size, handle)
            self._by_size[size].append(token)
            self._pooled += size
            while self._pooled > self.pool_bytes:
                self._release_oldest()

    def trim(self) -> None:
        """Release every pooled buffer."""
        with self.lock:
            while self._free:
                self._release_oldest()

    def memory(self) -> MemoryStats:
        with self.lock:
            return MemoryStats(self._live, self._pooled, self._buffers)

    def _release_oldest(self) -> None:
        size, _ = self._free.popitem(last=False)[1]
        self._by_size[size].pop(0)
        self._pooled -= size
        self._buffers -= 1

    def _new(self, size: int) -> Any:
        """A new device buffer; when the device is out of memory, empty the pool and try once more."""
        try:
            return self._device_alloc(size)
        except DeviceMemoryError as error:
            pooled = self._pooled
            self.trim()
            try:
                return self._device_alloc(size)
            except DeviceMemoryError:
                raise DeviceMemoryError(
                    f"{size:,} bytes could not be allocated on {self.describe()} ({error.detail}); "
                    f"{self._live:,} bytes are in use in {self._buffers} buffers, "
                    f"and {pooled:,} pooled bytes were released first"
                ) from error

    def _device_alloc(self, size: int) -> Any:
        if self._fault is not None:
            if self._fault_after:
                self._fault_after -= 1
            elif self._fault is Fault.OUT_OF_MEMORY:
                raise DeviceMemoryError("out of memory (injected)")
            else:
                self._fault = None
                self.simulate_loss()
        self.check_alive()
        handle = self._alloc(size)
        self._buffers += 1
        return handle

    @abstractmethod
    def _alloc(self, size: int) -> Any:
        """A new device buffer of ``size`` bytes; raise :class:`DeviceMemoryError` when out of memory."""

    @abstractmethod
    def copy_in(self, handle: Any, data: np.ndarray) -> None:
        """Write ``data`` to the start of ``handle``, after all work launched before."""

    @abstractmethod
    def copy_out(self, handle: Any, nbytes: int) -> bytes:
        """The first ``nbytes`` of ``handle`` once all work launched before is done."""

    # Fault injection, for tests only.
    def inject(self, fault: Fault | None, after: int = 0) -> None:
        """Make the device allocation after the next ``after`` ones fail: out of memory (this and every
        later one, until ``inject(None)``), or with the device lost. Used only by tests."""
        with self.lock:
            self._fault, self._fault_after = fault, after

    def simulate_loss(self) -> None:
        """Lose the device as the hardware would; subclasses whose library can destroy a device do so."""
        self.lose("injected fault")

    # Programs.
    def program(self, source: str, name: str) -> Any:
        """The compiled entry point ``name`` of ``source``, compiled on first use."""
        with self.lock:
            if source not in self._programs:
                self._programs[source] = self.compile(source, name)
            return self._programs[source]

    @abstractmethod
    def compile(self, source: str, name: str) -> Any:
        """Compile ``source``; raise :class:`~spawnml.errors.ExecutionError`-worthy errors as is."""

    @abstractmethod
    def launch(
        self, program: Any, buffers: Sequence[Any], grid: tuple[int, int, int], scalars: Sequence[np.generic]
    ) -> None:
        """Queue ``program`` over ``grid`` workgroups with ``buffers`` and ``scalars`` in parameter order;
        safe to call from several threads at once."""

    def library_matmul(
        self, a: Any, b: Any, out: Any, count: int, m: int, n: int, k: int, a_step: int, b_step: int
    ) -> bool:
        """Queue ``count`` float32 products ``out[i] = a[i] @ b[i]`` (row-major ``m x k`` by ``k x n``;
        a step of 0 repeats that operand) through a vendor library, and say so; ``False`` when this
        runtime has none worth calling at this size, and the kernel library's matmul runs instead."""
        return False


def size_class(nbytes: int) -> int:
    """The size a buffer for ``nbytes`` is made at: a multiple of :data:`ALIGN`, and past :data:`SMALL`
    one of eight sizes per power of two, so that tensors of nearby shapes share pooled buffers."""
    if nbytes <= SMALL:
        return max(ALIGN, -(-nbytes // ALIGN) * ALIGN)
    step = 1 << (nbytes.bit_length() - 4)
    return -(-nbytes // step) * step
