"""Record a fixed-shape training step once, replay it after: :func:`capture_step`.

The step runs eagerly once while a :class:`Recorder` watches every kernel call, in-place
write, transfer, random draw and host read; the result is a :class:`~.replay.Plan`. What the
step does in Python besides is done at capture only, except what asks to be repeated: the
optimizers' step counts and learning rates (read again for each update), learning-rate
schedulers' ``step``, dropout masks and index checks. Whatever else would make a replay differ
from the eager step (reading tensor data on the host, drawing other random numbers,
accumulating into gradients left by an earlier step) is refused at capture with a
:class:`CaptureError` saying what to change.
"""

from __future__ import annotations

import gc
import weakref
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np

from ..backend import KernelContext
from ..errors import AutogradError, InvalidArgumentError
from ..tensor import Tensor, capturing
from .replay import Assign, Check, Entry, HostCall, Kernel, Plan, Transfer, Upload

#: What a captured step does with arguments of another signature than one it has a plan for.
OnNewShapes = Literal["recapture", "refuse"]


class CaptureError(AutogradError):
    """A step that cannot be captured as it is, or a call a captured step refuses."""


class Recorder:
    """Builds a :class:`Plan` from what one eager run of a step does (installed on this thread
    as ``spawnml.tensor.capturing.recorder`` while it runs)."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.slots: dict[int, int] = {}  # id(buffer) -> slot
        self.buffers: list[Any] = []  # every buffer seen, alive so that ids stay unique
        self.produced: set[int] = set()  # slots written during the step
        self.state: list[tuple[int, Tensor]] = []
        self.made: dict[int, weakref.ref[Tensor]] = {}  # tensors made or rebound during the step
        self.allow_reads = 0
        self.allow_draws = 0
        self.modes: dict[int, tuple[weakref.ref[Any], bool]] = {}  # id(module) -> (module, training)

    # What the tensor and autograd layers tell the recorder.
    def created(self, tensor: Tensor) -> None:
        self.made[id(tensor)] = weakref.ref(tensor)

    rebound = created

    def kernel(
        self,
        fn: Callable[..., Any],
        ctx: KernelContext,
        inputs: tuple[Tensor | None, ...] | list[Tensor | None],
        results: tuple[Any, ...],
        refresh: Callable[[], dict[str, Any]] | None,
    ) -> None:
        reads = tuple(None if x is None else self.slot_of(x) for x in inputs)
        writes = tuple(None if r is None else self.produce(r) for r in results)
        self.entries.append(Kernel(fn, ctx, reads, writes, refresh))

    def replaced(self, tensor: Tensor, value: Tensor, rebind: bool) -> None:
        if rebind:
            self.rebound(tensor)
            return
        target = self.slot_of(tensor)
        self.entries.append(Assign(target, self.slot_of(value), tensor.backend))
        self.produced.add(target)

    def transfer(self, source: Tensor, result: Tensor) -> None:
        reads = self.slot_of(source)
        self.entries.append(Transfer(reads, source.backend, self.produce(result.buffer), result.backend))

    def upload(self, draw: Callable[[], np.ndarray], made: Tensor) -> None:
        self.entries.append(Upload(draw, self.produce(made.buffer), made.backend, made.dtype))

    def check(self, test: Callable[..., None], tensor: Tensor, args: tuple[Any, ...]) -> None:
        self.entries.append(Check(test, self.slot_of(tensor), tensor.backend, args))

    def module(self, module: Any) -> None:
        """Note a module the step calls: the plan holds while its ``training`` flag is unchanged."""
        self.modes.setdefault(id(module), (weakref.ref(module), bool(module.training)))

    def host_call(self, fn: Callable[[], Any]) -> None:
        self.entries.append(HostCall(fn))

    def host_read(self, tensor: Tensor) -> None:
        if not self.allow_reads:
            raise CaptureError(
                f"the step reads a tensor's data on the host while it is captured ({tensor!r}); a "
                "replay would not repeat what Python does with it. Return the tensor from the step "
                "and read it after, or run this step without capture_step"
            )

    def random_draw(self) -> None:
        if not self.allow_draws:
            raise CaptureError(
                "the step draws random numbers on the host while it is captured; a replay would "
                "reuse this draw (only dropout masks are drawn again). Draw them outside the step and "
                "pass them in"
            )

    def accumulating(self, leaf: Tensor) -> None:
        grad = leaf.grad
        if grad is not None and self.slots.get(id(grad.buffer)) not in self.produced:
            raise CaptureError(
                "the step accumulates gradients into .grad left by an earlier step; each replay would "
                "add to the gradients of the capture. Zero them inside the step (optimizer.zero_grad())"
            )

    @contextmanager
    def reading(self) -> Iterator[None]:
        self.allow_reads += 1
        try:
            yield
        finally:
            self.allow_reads -= 1

    @contextmanager
    def drawing(self) -> Iterator[None]:
        self.allow_draws += 1
        try:
            yield
        finally:
            self.allow_draws -= 1

    # Slots.
    def slot_of(self, tensor: Tensor) -> int:
        """The slot of ``tensor``'s buffer; a buffer seen for the first time is state the step
        reads, taken from ``tensor`` at each replay (from a copy of the reference if ``tensor``
        itself was made during the step and may be rebound)."""
        slot = self.slots.get(id(tensor.buffer))
        if slot is None:
            slot = self._new_slot(tensor.buffer)
            source = self.made.get(id(tensor))
            owner = Tensor(tensor.buffer, tensor.backend) if source and source() is tensor else tensor
            self.state.append((slot, owner))
        return slot

    def produce(self, buffer: Any) -> int:
        slot = self._new_slot(buffer)
        self.produced.add(slot)
        return slot

    def _new_slot(self, buffer: Any) -> int:
        self.buffers.append(buffer)
        self.slots[id(buffer)] = slot = len(self.buffers) - 1
        return slot

    def plan(self, inputs: list[int], outputs: list[Tensor]) -> Plan:
        """The plan of what was recorded, returning ``outputs``."""
        returned = tuple((self.slot_of(t), t.backend) for t in outputs)
        gc.collect()  # tensors of the step kept only by reference cycles are not bound
        bindings = []
        for ref in self.made.values():
            tensor = ref()
            if tensor is not None and self.slots.get(id(tensor.buffer)) in self.produced:
                bindings.append((ref, self.slots[id(tensor.buffer)]))
        modes = list(self.modes.values())
        return Plan(len(self.buffers), self.entries, tuple(inputs), self.state, returned, bindings, modes)


def capture_step(
    fn: Callable[..., Any] | None = None, *, warmup: int = 1, on_new_shapes: OnNewShapes = "recapture"
) -> Any:
    """``fn`` (a training step: zero_grad, forward, loss, backward, optimizer and scheduler
    steps) as a :class:`CapturedStep`; usable as a decorator, with or without arguments.

    The first ``warmup`` calls with a new signature (tensor shapes, dtypes and devices, other
    arguments' values) run eagerly, the next one is captured while it runs, and later calls
    replay the capture while the modules the step called keep their train/eval modes.
    ``on_new_shapes`` says what a call with another signature, or with modules in other modes,
    does: ``"recapture"`` (capture a plan for it too) or ``"refuse"`` (raise :class:`CaptureError`).
    """
    if on_new_shapes not in ("recapture", "refuse"):
        raise InvalidArgumentError(f"on_new_shapes is 'recapture' or 'refuse', not {on_new_shapes!r}")
    if warmup < 0:
        raise InvalidArgumentError(f"warmup must be at least 0, not {warmup}")
    if fn is None:
        return lambda step: CapturedStep(step, warmup, on_new_shapes)
    return CapturedStep(fn, warmup, on_new_shapes)


class CapturedStep:
    """A step function replayed from a plan per signature; call it as the function itself.

    A replay returns new tensors (detached: the graph was run at capture) and leaves the
    parameters, optimizer state and ``.grad`` as the eager step would, bit for bit.
    """

    def __init__(self, fn: Callable[..., Any], warmup: int, on_new_shapes: OnNewShapes) -> None:
        self.fn = fn
        self.warmup = warmup
        self.on_new_shapes = on_new_shapes
        self._plans: dict[Hashable, list[tuple[Plan, Callable[[list[Tensor]], Any]]]] = {}
        self._runs: Counter[Hashable] = Counter()
        self._first: Hashable | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        inputs, signature = _signature((args, kwargs))
        plans = self._plans.setdefault(signature, [])
        for plan, rebuild in plans:
            if plan.holds():
                return rebuild(plan.replay(inputs))
        if self.on_new_shapes == "refuse":
            if plans:
                raise CaptureError(
                    "this step was captured with its modules in other modes (train() or eval()); "
                    "capture_step(..., on_new_shapes='recapture') captures each"
                )
            if self._first is None:
                self._first = signature
            elif signature != self._first:
                raise CaptureError(
                    f"this step was captured for {_describe(self._first)} and refuses "
                    f"{_describe(signature)}; capture_step(..., on_new_shapes='recapture') captures each "
                    "new signature"
                )
        if self._runs[signature] < self.warmup:
            self._runs[signature] += 1
            return self.fn(*args, **kwargs)
        result, plan, rebuild = _capture(self.fn, args, kwargs, inputs)
        plans.append((plan, rebuild))
        return result

    @property
    def plans(self) -> int:
        """How many plans were captured (one per signature and set of module modes)."""
        return sum(len(plans) for plans in self._plans.values())

    def reset(self) -> None:
        """Forget every capture (after changing what the step does in Python, such as a
        hyperparameter other than the learning rate): the next calls warm up and capture again."""
        self._plans.clear()
        self._runs.clear()
        self._first = None


def _capture(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], inputs: list[Tensor]
) -> tuple[Any, Plan, Callable[[list[Tensor]], Any]]:
    if capturing.recorder is not None:
        raise CaptureError("a step is already being captured on this thread")
    recorder = Recorder()
    slots = [recorder.produce(t.buffer) for t in inputs]
    recorder.produced.difference_update(slots)
    capturing.recorder = recorder
    try:
        result = fn(*args, **kwargs)
    finally:
        capturing.recorder = None
    outputs, rebuild = _outputs(result)
    return result, recorder.plan(slots, outputs), rebuild


def _signature(value: Any) -> tuple[list[Tensor], Hashable]:
    """The tensors in ``value`` (nested tuples, lists and dicts), and what a plan is keyed by."""
    tensors: list[Tensor] = []

    def key(item: Any) -> Hashable:
        if isinstance(item, Tensor):
            tensors.append(item)
            return ("tensor", item.shape, item.dtype.str, item.device, item.requires_grad)
        if isinstance(item, tuple | list):
            return (type(item).__name__, tuple(key(x) for x in item))
        if isinstance(item, dict):
            return ("dict", tuple((k, key(v)) for k, v in item.items()))
        try:
            hash(item)
        except TypeError:
            raise CaptureError(
                f"a captured step takes tensors, and values it can compare from call to call; "
                f"not {type(item).__name__}"
            ) from None
        return ("value", type(item).__name__, item)

    return tensors, key(value)


def _describe(signature: Hashable) -> str:
    """The tensors of a signature, as ``float32[128, 64] on cpu``."""
    found: list[str] = []

    def walk(item: Any) -> None:
        if isinstance(item, tuple) and item and item[0] == "tensor":
            _, shape, dtype, device, _ = item
            found.append(f"{np.dtype(dtype).name}{list(shape)} on {device}")
        elif isinstance(item, tuple):
            for x in item:
                walk(x)

    walk(signature)
    return f"inputs ({', '.join(found)})" if found else f"arguments {signature!r}"


def _outputs(result: Any) -> tuple[list[Tensor], Callable[[list[Tensor]], Any]]:
    """The tensors a step returns, and how to build the same structure of replayed ones."""
    if result is None:
        return [], lambda _: None
    if isinstance(result, Tensor):
        return [result], lambda tensors: tensors[0]
    if isinstance(result, tuple | list | dict):
        items = list(result.values() if isinstance(result, dict) else result)
        parts = [_outputs(item) for item in items]
        counts = [len(tensors) for tensors, _ in parts]

        def rebuild(tensors: list[Tensor]) -> Any:
            built, start = [], 0
            for count, (_, inner) in zip(counts, parts, strict=True):
                built.append(inner(tensors[start : start + count]))
                start += count
            if isinstance(result, dict):
                return dict(zip(result.keys(), built, strict=True))
            return type(result)(built) if isinstance(result, list) else tuple(built)

        return [t for tensors, _ in parts for t in tensors], rebuild
    raise CaptureError(
        f"a captured step returns tensors (alone, or in tuples, lists and dicts) or None, not "
        f"{type(result).__name__}: a replay would return the capture's value unchanged"
    )
