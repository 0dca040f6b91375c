"""CPU kernels of the operators that run bodies: If, Loop, Scan and SequenceMap.

Bodies run through ``ctx.run_subgraph`` on plans prepared at load; what a body returns
(tensors, sequences, optionals) passes through unchanged. As in onnxruntime and the ONNX
reference, a Loop ends when its body returns a false condition even where the loop has
no condition input. The sequence and optional kernels are in :mod:`.sequence`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from spawnml.backend import KernelContext
from spawnml.errors import ModelLimitError
from spawnml.ir import TENSOR, Graph, Value
from spawnml.limits import run_limits
from spawnml.ops.defs.control import check_if, check_loop, check_scan, check_sequence_map
from spawnml.tensor import TensorSequence

from . import sequence  # noqa: F401  (registration by import)
from .checks import run_subgraph
from .table import KERNELS

INT64 = np.dtype(np.int64)

# ---------------------------------------------------------------------------- helpers


def _flag(condition: np.ndarray) -> bool:
    """The one boolean of a condition tensor."""
    return bool(np.asarray(condition).item())


def _stacked(parts: Sequence[np.ndarray], declared: Value, axis: int) -> np.ndarray:
    """Per-iteration outputs stacked on a new ``axis``; with none, an empty tensor of the declared type.

    As in onnxruntime, the declared dims that are not known numbers count as 0, and an
    undeclared shape gives ``[0]``.
    """
    if parts:
        return np.stack(parts, axis)
    if declared.kind != TENSOR or declared.dtype is None:
        raise ValueError(f"no iterations ran and the body declares no element type for {declared.name!r}")
    if declared.shape is None:
        return np.empty((0,), declared.dtype)
    dims = [dim if isinstance(dim, int) else 0 for dim in declared.shape]
    dims.insert(axis % (len(dims) + 1), 0)
    return np.empty(dims, declared.dtype)


def _feeds(body: Graph, values: Sequence[Any]) -> dict[str, Any]:
    return {value.name: given for value, given in zip(body.inputs, values, strict=True)}


# ---------------------------------------------------------------------------- If


@KERNELS.register("If", check=check_if)
def if_(ctx: KernelContext, condition: np.ndarray) -> tuple[Any, ...]:
    branch = ctx.attrs["then_branch"] if _flag(condition) else ctx.attrs["else_branch"]
    return tuple(run_subgraph(ctx, branch, {}))


# ---------------------------------------------------------------------------- Loop


@KERNELS.register("Loop", check=check_loop)
def loop(
    ctx: KernelContext, trip_count: np.ndarray | None, condition: np.ndarray | None, *initial: Any
) -> tuple[Any, ...]:
    """``for i in range(trip_count) while condition``; either bound may be absent.

    At most ``max_loop_iterations`` of the run's limits are run; one more is refused.
    """
    body: Graph = ctx.attrs["body"]
    most = run_limits().max_loop_iterations
    limit = None if trip_count is None else int(np.asarray(trip_count).item())
    running = condition is None or _flag(condition)
    carried = list(initial)
    declared = body.outputs[1 + len(carried) :]
    scanned: list[list[np.ndarray]] = [[] for _ in declared]
    iteration = 0
    while running and (limit is None or iteration < limit):
        if iteration == most:
            raise ModelLimitError("loop iterations", iteration + 1, most, f"node {ctx.node.label()!r}")
        feeds = _feeds(body, [np.array(iteration, INT64), np.array(running), *carried])
        verdict, *results = run_subgraph(ctx, body, feeds)
        running = _flag(verdict)
        carried = results[: len(carried)]
        for parts, result in zip(scanned, results[len(carried) :], strict=True):
            parts.append(result)
        iteration += 1
    return (*carried, *(_stacked(parts, value, 0) for parts, value in zip(scanned, declared, strict=True)))


# ---------------------------------------------------------------------------- Scan


def _along(tensor: np.ndarray, axis: int, backward: int) -> np.ndarray:
    """A view of ``tensor`` with its scan axis first, in the order the scan visits it."""
    moved = np.moveaxis(tensor, axis, 0)
    return moved[::-1] if backward else moved


def _scan_steps(
    ctx: KernelContext, body: Graph, states: list[Any], scans: list[np.ndarray]
) -> tuple[list[Any], list[list[np.ndarray]]]:
    """Run ``body`` once per leading slice of ``scans``: the final states and each scan output's parts."""
    lengths = {len(tensor) for tensor in scans}
    if len(lengths) != 1:
        raise ValueError(f"scan inputs have different lengths along their scan axes: {sorted(lengths)}")
    parts: list[list[np.ndarray]] = [[] for _ in body.outputs[len(states) :]]
    for step in range(lengths.pop()):
        results = run_subgraph(ctx, body, _feeds(body, [*states, *(tensor[step] for tensor in scans)]))
        states = results[: len(states)]
        for collected, result in zip(parts, results[len(states) :], strict=True):
            collected.append(result)
    return states, parts


@KERNELS.register("Scan", since=9, check=check_scan)
def scan(ctx: KernelContext, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    body: Graph = ctx.attrs["body"]
    count = ctx.attrs["num_scan_inputs"]
    split = len(inputs) - count
    outputs = len(body.outputs) - split
    axes = ctx.attrs.get("scan_input_axes") or [0] * count
    backward = ctx.attrs.get("scan_input_directions") or [0] * count
    scans = [
        _along(tensor, axis, back) for tensor, axis, back in zip(inputs[split:], axes, backward, strict=True)
    ]
    finals, parts = _scan_steps(ctx, body, list(inputs[:split]), scans)
    out_axes = ctx.attrs.get("scan_output_axes") or [0] * outputs
    prepend = ctx.attrs.get("scan_output_directions") or [0] * outputs
    stacked = [
        _stacked(collected[::-1] if front else collected, value, axis)
        for collected, value, axis, front in zip(parts, body.outputs[split:], out_axes, prepend, strict=True)
    ]
    return (*finals, *stacked)


def _padded(part: np.ndarray, length: int) -> np.ndarray:
    """``part`` padded with zeros along axis 0 to ``length``."""
    padding = np.zeros((length - len(part), *part.shape[1:]), part.dtype)
    return np.concatenate([part, padding])


@KERNELS.register("Scan", since=8, until=9, check=check_scan)
def scan8(ctx: KernelContext, lengths: np.ndarray | None, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Scan over axis 1 of batched inputs, each batch item for its own length; outputs are zero-padded."""
    body: Graph = ctx.attrs["body"]
    count = ctx.attrs["num_scan_inputs"]
    split = len(inputs) - count
    backward = ctx.attrs.get("directions") or [0] * count
    batch, longest = inputs[split].shape[:2]
    finals: list[list[np.ndarray]] = [[] for _ in range(split)]
    scanned: list[list[np.ndarray]] = [[] for _ in body.outputs[split:]]
    for item in range(batch):
        length = longest if lengths is None else int(lengths[item])
        scans = [
            _along(tensor[item, :length], 0, back)
            for tensor, back in zip(inputs[split:], backward, strict=True)
        ]
        states, parts = _scan_steps(ctx, body, [state[item] for state in inputs[:split]], scans)
        for collected, state in zip(finals, states, strict=True):
            collected.append(state)
        for collected, part, value in zip(scanned, parts, body.outputs[split:], strict=True):
            collected.append(_padded(_stacked(part, value, 0), longest))
    return tuple(np.stack(collected) for collected in (*finals, *scanned))


# ---------------------------------------------------------------------------- SequenceMap


@KERNELS.register("SequenceMap", since=17, check=check_sequence_map)
def sequence_map(ctx: KernelContext, first: TensorSequence, *extra: Any) -> tuple[TensorSequence, ...]:
    """The body applied to the i-th tensor of every sequence input and to every tensor input."""
    body: Graph = ctx.attrs["body"]
    inputs = (first, *extra)
    lengths = {len(given) for given in inputs if isinstance(given, TensorSequence)}
    if len(lengths) != 1:
        raise ValueError(f"the sequences to map have different lengths: {sorted(lengths)}")
    results = [
        run_subgraph(ctx, body, _feeds(body, [_item(given, index) for given in inputs]))
        for index in range(len(first))
    ]
    columns = list(zip(*results, strict=True)) if results else [()] * len(body.outputs)
    return tuple(
        TensorSequence(tuple(column), column[0].dtype if column else value.dtype)
        for column, value in zip(columns, body.outputs, strict=True)
    )


def _item(given: Any, index: int) -> Any:
    return given.items[index] if isinstance(given, TensorSequence) else given
