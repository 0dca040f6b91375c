"""A recorded step as a flat plan: kernel calls and host actions over numbered buffer slots.

Replaying a plan calls the kernels the step called, with the contexts they had, on the buffers
of this call: no graph is built, no operator is looked up, no attribute resolved. Slots are
filled from the step's inputs and from the tensors it read that existed before it (parameters,
optimizer state, constants), each read at the start of every replay so that state updated in
place, or rebound between replays, is seen as it is now. A slot is dropped after its last
reader, so the backend's pool serves the buffers of one step to the next.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..backend import Backend, KernelContext
from ..tensor import Tensor

Slots = list[Any]


class Entry:
    """One action of a plan; ``release`` names the slots whose last reader it is."""

    release: tuple[int, ...] = ()

    def reads(self) -> tuple[int, ...]:
        return ()

    def run(self, slots: Slots) -> None:
        raise NotImplementedError


@dataclass(eq=False)
class Kernel(Entry):
    """A kernel call; ``refresh`` gives attributes that change from step to step."""

    fn: Callable[..., Any]
    ctx: KernelContext
    inputs: tuple[int | None, ...]
    outputs: tuple[int | None, ...]
    refresh: Callable[[], dict[str, Any]] | None = None

    def reads(self) -> tuple[int, ...]:
        return tuple(i for i in self.inputs if i is not None)

    def run(self, slots: Slots) -> None:
        if self.refresh is not None:
            self.ctx.attrs.update(self.refresh())
        result = self.fn(self.ctx, *[None if i is None else slots[i] for i in self.inputs])
        results = result if isinstance(result, tuple | list) else (result,)
        for slot, value in zip(self.outputs, results, strict=False):
            if slot is not None:
                slots[slot] = value


@dataclass(eq=False)
class Assign(Entry):
    """An in-place write of one buffer's data into another (an optimizer's update)."""

    target: int
    source: int
    backend: Backend

    def reads(self) -> tuple[int, ...]:
        return self.target, self.source

    def run(self, slots: Slots) -> None:
        self.backend.assign(slots[self.target], slots[self.source])


@dataclass(eq=False)
class HostCall(Entry):
    """Python the step runs each time (a learning-rate scheduler's ``step``)."""

    fn: Callable[[], Any]

    def run(self, slots: Slots) -> None:
        self.fn()


@dataclass(eq=False)
class Check(Entry):
    """A validation that reads a tensor on the host (index ranges) and raises."""

    test: Callable[..., None]
    slot: int
    backend: Backend
    args: tuple[Any, ...]

    def reads(self) -> tuple[int, ...]:
        return (self.slot,)

    def run(self, slots: Slots) -> None:
        self.test(Tensor(slots[self.slot], self.backend), *self.args)


@dataclass(eq=False)
class Upload(Entry):
    """A host array drawn again on each replay (a dropout mask) and placed on the device."""

    draw: Callable[[], np.ndarray]
    slot: int
    backend: Backend
    dtype: np.dtype

    def run(self, slots: Slots) -> None:
        slots[self.slot] = self.backend.from_numpy(np.asarray(self.draw(), dtype=self.dtype))


@dataclass(eq=False)
class Transfer(Entry):
    """A copy from one backend to another, through the host."""

    source: int
    source_backend: Backend
    slot: int
    backend: Backend

    def reads(self) -> tuple[int, ...]:
        return (self.source,)

    def run(self, slots: Slots) -> None:
        host = self.source_backend.to_numpy(slots[self.source])
        slots[self.slot] = self.backend.from_numpy(host)


@dataclass(eq=False)
class Plan:
    """A captured step: its entries over ``size`` slots, where its inputs and the state it read
    go, which slots it returns, which tensors alive after the capture to rebind to the new
    buffers (the gradients in ``.grad``), and the modes of the modules it called."""

    size: int
    entries: list[Entry]
    inputs: tuple[int, ...]
    state: list[tuple[int, Tensor]]
    outputs: tuple[tuple[int, Backend], ...]
    bindings: list[tuple[weakref.ref[Tensor], int]] = field(default_factory=list)
    #: The modules the step called and their ``training`` flags at capture.
    modes: list[tuple[weakref.ref[Any], bool]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._mark_releases()

    def holds(self) -> bool:
        """Whether every module the step called is still in the mode it was captured in."""
        return all(module.training == flag for ref, flag in self.modes if (module := ref()) is not None)

    def replay(self, inputs: Sequence[Tensor]) -> list[Tensor]:
        """Run the step on ``inputs`` (the tensors of the call, in the captured order) and return
        its output tensors."""
        slots: Slots = [None] * self.size
        for slot, tensor in zip(self.inputs, inputs, strict=True):
            slots[slot] = tensor._buffer
        for slot, tensor in self.state:
            slots[slot] = tensor._buffer
        with np.errstate(all="ignore"):  # IEEE results without warnings, as an eager operation gives
            for entry in self.entries:
                entry.run(slots)
                for slot in entry.release:
                    slots[slot] = None
        for ref, slot in self.bindings:
            if (bound := ref()) is not None:
                bound._buffer = slots[slot]
        return [Tensor(slots[slot], backend) for slot, backend in self.outputs]

    def _mark_releases(self) -> None:
        kept = {slot for slot, _ in self.outputs} | {slot for _, slot in self.bindings}
        last: dict[int, int] = {}
        for index, entry in enumerate(self.entries):
            for slot in entry.reads():
                last[slot] = index
        by_entry: dict[int, list[int]] = {}
        for slot, index in last.items():
            if slot not in kept:
                by_entry.setdefault(index, []).append(slot)
        for index, slots in by_entry.items():
            self.entries[index].release = tuple(slots)
