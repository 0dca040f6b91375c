"""Fixed-shape runs captured once and replayed as one graph: the logic, apart from any GPU library.

A :class:`CapturingRuntime` records the work queued between :meth:`~CapturingRuntime.begin_capture`
and :meth:`~CapturingRuntime.end_capture` as a graph instead of running it (CUDA's stream capture;
a subclass says how), and keeps the memory the graph reads and writes from being handed to other
work: buffers allocated while capturing come from, and go back to, a pool of the graph's own, and
every buffer a captured launch binds is *pinned* (released, never pooled, when its tensor is
dropped) for as long as the graph lives.

Host data written into a new buffer (a shape computed on the host, a constant made during the run)
is written at once, outside the graph, and the buffer kept unchanged for the graph's life: the
capture's inputs carry no host copies, so such data depends only on the signature and the model's
constants, as it would on every replay. Host data written into a buffer the graph already uses is
refused with :class:`CaptureRefused`. Device data read on the host (a shape computed on the device,
a shape that depends on the data) ends a *segment*: what was recorded so far runs, the value is
read and kept, and recording goes on. A replay runs the segments in turn and reads each value
again; where one differs from the capture's (the shape depends on the data), the run is made
eagerly instead, and the signature is not replayed again.

A :class:`GraphRunner` runs a function of device tensors (a plan's run) through such a runtime:
the first calls with a new signature (shapes and element types) run eagerly, the next is captured
and then replayed, and later ones copy their inputs into the capture's own, replay the one graph
and copy its outputs out. A signature whose capture was refused runs eagerly from then on, and
:attr:`GraphRunner.report` says which and why.
"""

from __future__ import annotations

import weakref
from abc import abstractmethod
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from spawnml.errors import DeviceError, InvalidArgumentError
from spawnml.gpu import GPUBackend, Runtime
from spawnml.gpu.array import DeviceArray
from spawnml.gpu.runtime import size_class


class CaptureRefused(DeviceError):
    """Work that a graph replay would not repeat was asked for while capturing."""


#: Allocations of at most this many bytes during a capture are new buffers, never ones the capture
#: freed: host data (shapes, small constants) may then be written into them at once.
BAKED_BYTES = 4096


@dataclass(eq=False)
class Capture:
    """What one capture holds, by ``id`` of the handle: every buffer its work touched, those its
    kernels use (which host data may no longer be written into), those written from the host at
    capture (kept unchanged); the buffers freed while capturing, by size, which its later
    allocations reuse, and the host-written ones freed, which it keeps."""

    held: dict[int, Any] = field(default_factory=dict)
    used: set[int] = field(default_factory=set)
    baked: set[int] = field(default_factory=set)
    spare: defaultdict[int, list[Any]] = field(default_factory=lambda: defaultdict(list))
    kept: list[tuple[Any, int]] = field(default_factory=list)
    segments: list[tuple[Any, HostRead | None]] = field(default_factory=list)

    def hold(self, handle: Any, used: bool = False) -> None:
        self.held[id(handle)] = handle
        if used:
            self.used.add(id(handle))

    def owned(self) -> list[tuple[Any, int]]:
        """The buffers no tensor holds any more: the graph's own."""
        return [(h, size) for size, handles in self.spare.items() for h in handles] + self.kept


@dataclass(frozen=True)
class HostRead:
    """Device data a capture read on the host after a segment: where, and what it was."""

    handle: Any
    nbytes: int
    value: bytes


class Graph:
    """A captured graph, as segments each followed by the host read that ended it (None after the
    last), and the buffers it reads and writes, which it keeps alive and pinned; the pins go, and
    the graph's own pooled buffers are released, when it is dropped."""

    def __init__(self, runtime: CapturingRuntime, native: Any, capture: Capture) -> None:
        self.segments: list[tuple[Any, HostRead | None]] = [*capture.segments, (native, None)]
        owned = capture.owned()
        released = {id(handle) for handle, _ in owned}
        pinned = [key for key in capture.held if key not in released]
        runtime.pin(pinned)
        weakref.finalize(self, runtime.unpin, pinned, owned, capture.held).atexit = False


class CapturingRuntime(Runtime):
    """A runtime whose queued work can be captured as a graph and replayed (see the module).

    Subclasses queue work in :meth:`enqueue` and :meth:`enqueue_matmul` and copy in :meth:`upload`
    and :meth:`download` (this class guards :meth:`launch`, :meth:`copy_in` and their kind), and
    implement the four graph calls of their library.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # a mixin: the library runtime's own arguments
        #: The capture under way; while there is one, its thread holds :attr:`lock`.
        self.capture: Capture | None = None
        self._pins: Counter[int] = Counter()

    # The library's graph calls.
    @abstractmethod
    def start_capture(self) -> None:
        """Begin recording the queued work instead of running it."""

    @abstractmethod
    def finish_capture(self) -> Any:
        """Stop recording; the graph of what was recorded (raise if the library refuses it)."""

    @abstractmethod
    def discard_capture(self) -> None:
        """Stop recording and drop what was recorded (after a refusal or an error)."""

    @abstractmethod
    def launch_graph(self, native: Any) -> None:
        """Queue one replay of a graph :meth:`finish_capture` gave."""

    @abstractmethod
    def copy_device(self, source: Any, target: Any, nbytes: int) -> None:
        """Queue a copy of ``nbytes`` from the start of ``source`` to the start of ``target``."""

    @abstractmethod
    def upload_now(self, handle: Any, data: np.ndarray) -> None:
        """Write host data to a buffer at once, outside the capture under way (which the work
        queued before it no longer touches: :meth:`start_capture` waited for it)."""

    # Capture.
    def begin_capture(self) -> None:
        """Record what this thread queues from now on; other threads wait until the capture ends."""
        self.lock.acquire()
        if self.capture is not None:
            self.lock.release()
            raise InvalidArgumentError(f"{self.describe()} is already capturing a graph on this thread")
        self.capture = Capture()
        try:
            self.start_capture()
        except BaseException:
            self._end()
            raise

    def end_capture(self) -> Graph:
        """The graph of what was queued since :meth:`begin_capture`."""
        capture = self._current()
        try:
            native = self.finish_capture()
        except BaseException:
            self.abort_capture()  # ends what the library may still record
            raise
        self._end()
        return Graph(self, native, capture)

    def abort_capture(self) -> None:
        """Drop what was recorded since :meth:`begin_capture`."""
        capture = self._current()
        try:
            self.discard_capture()
        finally:
            self._return_spares(capture)
            self._end()

    def replay(self, graph: Graph) -> bool:
        """Queue ``graph``'s segments, reading its host reads again between them; False, having
        stopped, where a value read differs from the capture's."""
        with self.lock:
            self.check_alive()
            for native, read in graph.segments:
                self.launch_graph(native)
                if read is not None and self.download(read.handle, read.nbytes) != read.value:
                    return False
            return True

    def _current(self) -> Capture:
        if self.capture is None:
            raise InvalidArgumentError(f"{self.describe()} is not capturing")
        return self.capture

    def _end(self) -> None:
        self.capture = None
        self.lock.release()

    def _return_spares(self, capture: Capture) -> None:
        for handle, size in capture.owned():
            super().free(handle, size, id(handle) not in self._pins)

    # Pins.
    def pinned(self, handle: Any) -> bool:
        """Whether a live graph reads or writes ``handle``."""
        with self.lock:
            return self._pins[id(handle)] > 0

    def pin(self, keys: Sequence[int]) -> None:
        with self.lock:
            self._pins.update(keys)

    def unpin(self, keys: Sequence[int], owned: Sequence[tuple[Any, int]], _held: Any) -> None:
        """Called when a graph goes (``_held`` is its buffers, kept alive until then)."""
        with self.lock:
            self._pins.subtract(keys)
            self._pins += Counter()  # drops the keys at zero
            for handle, size in owned:
                super().free(handle, size, reuse=False)

    # Memory: a capture allocates from its own buffers, and pinned buffers are never pooled.
    def alloc(self, nbytes: int) -> tuple[Any, int]:
        with self.lock:
            capture = self.capture
            if capture is None:
                return super().alloc(nbytes)
            size = size_class(nbytes)
            spare = capture.spare.get(size) if size > BAKED_BYTES else None
            if spare:
                handle = spare.pop()
                capture.hold(handle, used=True)
                return handle, size
            handle, size = super().alloc(nbytes)
            capture.hold(handle)
            return handle, size

    def free(self, handle: Any, size: int, reuse: bool = True) -> None:
        with self.lock:
            capture, key = self.capture, id(handle)
            pinned = self._pins[key] > 0
            if capture is None or key not in capture.held or pinned:
                super().free(handle, size, reuse and not pinned)
            elif key in capture.baked:
                capture.kept.append((handle, size))
            else:
                capture.spare[size].append(handle)

    # What a capture records, and what it refuses.
    def launch(
        self, program: Any, buffers: Sequence[Any], grid: tuple[int, int, int], scalars: Sequence[np.generic]
    ) -> None:
        with self.lock:
            if self.capture is not None:
                for handle in buffers:
                    self.capture.hold(handle, used=True)
            self.enqueue(program, buffers, grid, scalars)

    def library_matmul(
        self, a: Any, b: Any, out: Any, count: int, m: int, n: int, k: int, a_step: int, b_step: int
    ) -> bool:
        with self.lock:
            if self.capture is not None:
                for handle in (a, b, out):
                    self.capture.hold(handle, used=True)
            return self.enqueue_matmul(a, b, out, count, m, n, k, a_step, b_step)

    def copy_in(self, handle: Any, data: np.ndarray) -> None:
        with self.lock:
            capture = self.capture
            if capture is None:
                self.upload(handle, data)
                return
            if id(handle) in capture.used:
                raise CaptureRefused(
                    f"cannot be captured as a graph: {data.nbytes:,} bytes of host data are written into "
                    "a buffer the graph already uses"
                )
            self.upload_now(handle, data)
            capture.hold(handle)
            capture.baked.add(id(handle))

    def copy_out(self, handle: Any, nbytes: int) -> bytes:
        with self.lock:
            capture = self.capture
            if capture is None:
                return self.download(handle, nbytes)
            # The segment so far runs, and recording goes on after the read (see the module).
            native = self.finish_capture()
            self.launch_graph(native)
            value = self.download(handle, nbytes)
            capture.segments.append((native, HostRead(handle, nbytes, value)))
            capture.hold(handle, used=True)
            self.start_capture()
            return value

    @abstractmethod
    def enqueue(
        self, program: Any, buffers: Sequence[Any], grid: tuple[int, int, int], scalars: Sequence[np.generic]
    ) -> None:
        """Queue a kernel (see :meth:`Runtime.launch`)."""

    def enqueue_matmul(
        self, a: Any, b: Any, out: Any, count: int, m: int, n: int, k: int, a_step: int, b_step: int
    ) -> bool:
        """Queue a product through a vendor library (see :meth:`Runtime.library_matmul`)."""
        return False

    @abstractmethod
    def upload(self, handle: Any, data: np.ndarray) -> None:
        """Write host data to a buffer (see :meth:`Runtime.copy_in`)."""

    @abstractmethod
    def download(self, handle: Any, nbytes: int) -> bytes:
        """Read a buffer back (see :meth:`Runtime.copy_out`)."""


#: ``body(inputs) -> outputs``: a plan's run, device tensors in; what it returns is captured where
#: every output is a whole device tensor of the runtime.
Body = Callable[[list[DeviceArray]], list[Any]]


@dataclass
class GraphReport:
    """What a :class:`GraphRunner` did: runs by kind, and why each refused signature runs eagerly."""

    eager: int = 0
    captures: int = 0
    replays: int = 0
    #: Signature (see :func:`describe`) -> why it was not captured.
    refused: dict[str, str] = field(default_factory=dict)


@dataclass(eq=False)
class Captured:
    """A signature's capture: the graph, the inputs it reads and the outputs it writes."""

    graph: Graph
    inputs: list[DeviceArray]
    outputs: list[DeviceArray]


class GraphRunner:
    """Runs bodies as graphs on ``backend``'s runtime, one per signature (see the module)."""

    def __init__(self, backend: GPUBackend, warmup: int = 1) -> None:
        if warmup < 0:
            raise InvalidArgumentError(f"warmup must be at least 0, not {warmup}")
        self.backend = backend
        self.warmup = warmup
        self.report = GraphReport()
        self._graphs: dict[str, Captured] = {}
        self._runs: Counter[str] = Counter()

    def run(self, body: Body, inputs: list[DeviceArray], key: Hashable = ()) -> list[Any]:
        """``body(inputs)``, replayed from its graph once captured. ``key`` tells apart bodies that
        do other work on inputs of the same shapes (the outputs asked for): a key's body must do
        the same work on every call."""
        signature = describe(key, inputs)
        captured = self._graphs.get(signature)
        if captured is not None:
            return self._replay(captured, inputs, signature, body, replay=True)
        if signature in self.report.refused or self._runs[signature] < self.warmup:
            self._runs[signature] += 1
            self.report.eager += 1
            return body(inputs)
        runtime = self._runtime()
        if any(x.offset for x in inputs):
            return self._refuse(signature, "an input is a window of a larger tensor", body, inputs)
        static = [self.backend.empty(x.shape, x.dtype) for x in inputs]
        for source, target in zip(inputs, static, strict=True):  # what host reads will see
            runtime.copy_device(source.handle, target.handle, nbytes(source))
        runtime.begin_capture()
        try:
            outputs = body(static)
            whole = [
                isinstance(y, DeviceArray) and y.storage.runtime is runtime and not y.offset for y in outputs
            ]
            if not all(whole):
                raise CaptureRefused(
                    f"cannot be captured as a graph: an output is not a whole tensor on {runtime.describe()}"
                )
        except Exception as error:
            runtime.abort_capture()
            return self._refuse(signature, _reason(error), body, inputs)
        except BaseException:
            runtime.abort_capture()
            raise
        try:
            graph = runtime.end_capture()
        except Exception as error:  # what was recorded, the library refuses
            return self._refuse(signature, _reason(error), body, inputs)
        captured = self._graphs[signature] = Captured(graph, static, outputs)
        self.report.captures += 1
        return self._replay(captured, inputs, signature, body, replay=False)

    @property
    def graphs(self) -> dict[str, Captured]:
        """The captures, by signature (see :func:`describe`)."""
        return dict(self._graphs)

    def _runtime(self) -> CapturingRuntime:
        runtime = self.backend.runtime
        if not isinstance(runtime, CapturingRuntime):
            raise InvalidArgumentError(f"{runtime.describe()} does not capture graphs")
        return runtime

    def _refuse(self, signature: str, reason: str, body: Body, inputs: list[DeviceArray]) -> list[Any]:
        """``body`` run eagerly for a signature that cannot be captured; an error it raises then is
        the run's own, and the signature is tried again next time."""
        results = body(inputs)
        self.report.refused[signature] = reason
        self.report.eager += 1
        return results

    def _replay(
        self, captured: Captured, inputs: list[DeviceArray], signature: str, body: Body, replay: bool
    ) -> list[Any]:
        """The graph run on ``inputs`` (counted as a replay, or as the capture's own run), or
        ``body`` run eagerly where a host read differs from the capture's."""
        runtime = self._runtime()
        with runtime.lock:  # the copies and the replay in turn, not interleaved with another's
            for source, target in zip(inputs, captured.inputs, strict=True):
                runtime.copy_device(source.handle, target.handle, nbytes(source))
            if runtime.replay(captured.graph):
                results = [self.backend.empty(y.shape, y.dtype) for y in captured.outputs]
                for source, target in zip(captured.outputs, results, strict=True):
                    runtime.copy_device(source.handle, target.handle, nbytes(source))
                self.report.replays += replay
                return results
        del self._graphs[signature]
        reason = "a value read on the host differs from the capture's: a shape depends on the data"
        return self._refuse(signature, reason, body, inputs)


def _reason(error: Exception) -> str:
    """Why a capture failed: a refusal says so itself; another error (the library's) is named."""
    if isinstance(error, CaptureRefused):
        return str(error)
    return f"cannot be captured as a graph: {type(error).__name__}: {error}"


def describe(key: Hashable, inputs: Sequence[DeviceArray]) -> str:
    """A run's signature: its key and its inputs' element types and shapes."""
    shapes = ", ".join(f"{x.dtype.name}{list(x.shape)}" for x in inputs)
    return f"{key!r} on ({shapes})" if key != () else f"({shapes})"


def nbytes(x: DeviceArray) -> int:
    return x.size * x.elem.bits // 8
