"""What a backend plugin provides: a device, memory, and a table of kernels.

A kernel is a Python callable ``kernel(ctx, *inputs)`` that receives the backend's
buffers (``None`` for omitted optional inputs) and returns one buffer, or a tuple with
one buffer per node output (``None`` for optional outputs it does not produce). Node
attributes, with the schema's defaults filled in, are in ``ctx.attrs``.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from importlib.resources.abc import Traversable
from typing import Any, ClassVar

import numpy as np

from .dtypes import name as dtype_name
from .errors import PluginError
from .ir import Graph, Node

#: Returns why a node cannot run (refused at load), or None when it can.
CheckFn = Callable[[Node, int], "str | None"]


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run here, and why not."""

    available: bool
    reason: str = ""


@dataclass
class KernelContext:
    """What a kernel sees besides its inputs."""

    node: Node
    opset: int
    attrs: dict[str, Any]
    backend: Backend
    #: Runs a subgraph (If branch, Loop body) with named feeds on this backend.
    run_subgraph: Callable[[Graph, dict[str, Any]], list[Any]] | None = None


@dataclass(frozen=True)
class KernelSpec:
    """A kernel for one operator over an opset range, with an optional load-time check."""

    op_type: str
    domain: str
    fn: Callable[..., Any]
    since_version: int = 1
    until_version: int | None = None  # exclusive
    check: CheckFn | None = None
    #: Element types the kernel takes for its first input (None: any the backend holds).
    dtypes: frozenset[np.dtype] | None = None
    #: Who registered it, when not the table's owner: the plugin, as errors name it.
    origin: str = ""

    def overlaps(self, other: KernelSpec) -> bool:
        """Whether both kernels claim some opset version."""
        end, other_end = self.until_version or 1 << 30, other.until_version or 1 << 30
        return self.since_version < other_end and other.since_version < end

    def covers(self, opset: int) -> bool:
        return self.since_version <= opset and (self.until_version is None or opset < self.until_version)

    def describe(self) -> str:
        """The kernel as errors name it: its function, and the plugin that registered it."""
        where = f"{self.fn.__module__}.{self.fn.__qualname__}"
        return f"{where} from {self.origin}" if self.origin else where


@dataclass
class KernelTable:
    """The kernels a backend runs natively, keyed by ``(domain, op_type)``.

    ``modules`` name the modules whose import registers kernels here: they are imported on the
    first lookup, so that discovering a backend does not import its kernels' dependencies.

    A table made by :meth:`extended` holds the kernels plugins register for one backend
    instance over the backend's own (its ``base``): lookups see both, and the backend's own
    table is never written to.
    """

    _specs: dict[tuple[str, str], list[KernelSpec]] = field(default_factory=dict)
    modules: tuple[str, ...] = ()
    base: KernelTable | None = None
    _loading: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    #: Whether this table's kernels were checked against the base's, which loads lazily.
    _checked: bool = field(default=False, repr=False, compare=False)

    def extended(self) -> KernelTable:
        """An empty table over this one, for kernels added to one backend instance."""
        return KernelTable(base=self)

    def _load(self) -> None:
        if self.base is not None and not self._checked:
            # Kernels registered while the base was not loaded yet are checked against it on the
            # first lookup: loading it imports its kernel modules, which discovery must not do.
            self.base._load()
            for key, specs in self._specs.items():
                for spec in specs:
                    _refuse_overlap(spec, self.base._specs.get(key, ()))
            self._checked = True
        if not self.modules:
            return
        with self._loading:  # another thread must not see the table half filled
            for module in self.modules:
                import_module(module)
            self.modules = ()

    def register(
        self,
        op_type: str,
        domain: str = "",
        since: int = 1,
        until: int | None = None,
        check: CheckFn | None = None,
        dtypes: Collection[Any] | None = None,
        origin: str = "",
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: register ``fn`` as the kernel for ``op_type`` over ``[since, until)``;
        ``origin`` names the plugin registering it on a table it does not own."""
        allowed = None if dtypes is None else frozenset(np.dtype(d) for d in dtypes)
        domain = "" if domain == "ai.onnx" else domain

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            spec = KernelSpec(op_type, domain, fn, since, until, check, allowed, origin)
            key = (domain, op_type)
            _refuse_overlap(spec, self._specs.get(key, ()))
            if self.base is not None and not self.base.modules:  # the base is loaded: check now,
                # else on the first lookup (see _load)
                _refuse_overlap(spec, self.base._specs.get(key, ()))
            self._specs.setdefault(key, []).append(spec)
            return fn

        return decorate

    def find(self, domain: str, op_type: str, opset: int) -> KernelSpec | None:
        self._load()
        domain = "" if domain == "ai.onnx" else domain
        for spec in self._specs.get((domain, op_type), ()):
            if spec.covers(opset):
                return spec
        return None if self.base is None else self.base.find(domain, op_type, opset)

    def ops(self) -> set[tuple[str, str]]:
        self._load()
        return set(self._specs) | (set() if self.base is None else self.base.ops())


def _refuse_overlap(spec: KernelSpec, existing: Collection[KernelSpec]) -> None:
    """Refuse ``spec`` when one of ``existing`` already covers one of its opset versions."""
    for other in existing:
        if spec.overlaps(other):
            raise PluginError(
                f"two kernels for {spec.domain or 'ai.onnx'}::{spec.op_type} cover the same opsets: "
                f"{other.describe()} and {spec.describe()}"
            )


class Backend(ABC):
    """Base class of backend plugins. Subclasses set ``name`` and ``kernels``."""

    name: ClassVar[str]
    #: The kernels it runs natively: the class's table, which the plugin registry extends for
    #: its instance (:meth:`KernelTable.extended`) with the kernels other plugins add for it.
    kernels: KernelTable
    #: The conformance cases this backend is expected to fail: a TOML file with a ``[cases]``
    #: table of ``test_name = "reason"`` (see :mod:`spawnml.conformance.expectations`).
    expected_failures: ClassVar[Traversable | None] = None
    #: Element types the backend's memory holds (None: any).
    element_types: ClassVar[frozenset[np.dtype] | None] = None

    @abstractmethod
    def availability(self) -> Availability:
        """Whether this backend has a usable device here."""

    @abstractmethod
    def device_name(self) -> str:
        """A human-readable name of the device the backend runs on."""

    def unsupported_reason(
        self,
        node: Node,
        opset: int,
        input_dtypes: Sequence[np.dtype | None] = (),
        output_dtypes: Sequence[np.dtype | None] = (),
    ) -> str | None:
        """Why this backend cannot run ``node`` (None when it can).

        The dtypes, where shape inference knows them, let a backend refuse at load what its
        memory cannot hold or its kernel does not take.
        """
        spec = self.kernels.find(node.domain, node.op_type, opset)
        if spec is None:
            return f"no {self.name} kernel"
        if self.element_types is not None:
            unheld = {d for d in (*input_dtypes, *output_dtypes) if d is not None} - self.element_types
            if unheld:
                return f"{self.name} holds no {', '.join(sorted(map(dtype_name, unheld)))} tensors"
        first = input_dtypes[0] if input_dtypes else None
        if spec.dtypes is not None and first is not None and first not in spec.dtypes:
            takes = ", ".join(sorted(map(dtype_name, spec.dtypes)))
            return f"the {self.name} kernel takes {takes}, not {dtype_name(first)}"
        return spec.check(node, opset) if spec.check else None

    # Memory. Buffers are whatever the backend uses; numpy arrays cross the boundary.
    @abstractmethod
    def from_numpy(self, array: np.ndarray) -> Any:
        """Copy (or wrap) a host array into a device buffer."""

    @abstractmethod
    def to_numpy(self, buffer: Any) -> np.ndarray:
        """Read a device buffer back to the host."""

    @abstractmethod
    def shape_of(self, buffer: Any) -> tuple[int, ...]:
        """The shape of a buffer."""

    @abstractmethod
    def dtype_of(self, buffer: Any) -> np.dtype:
        """The element type of a buffer."""

    def assign(self, target: Any, source: Any) -> None:
        """Overwrite ``target``'s data with ``source``'s (same shape and dtype): in-place tensor updates."""
        raise PluginError(f"the {self.name} backend does not update tensors in place")

    def from_dlpack(self, obj: Any) -> Any:
        """Wrap a DLPack-capable object as a buffer; the default goes through the host."""
        return self.from_numpy(np.from_dlpack(obj))

    def dlpack_source(self, buffer: Any) -> Any:
        """An object exporting ``__dlpack__`` for ``buffer``; the default reads it back first."""
        return self.to_numpy(buffer)

    def discard(self, buffer: Any) -> None:
        """Free ``buffer``'s device memory once it is dropped rather than keep it for reuse (a closed
        session's weights); the default leaves it to garbage collection."""
        del buffer
