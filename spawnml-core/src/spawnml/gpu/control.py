"""The operators that run bodies, on the GPU: If, Loop, Scan (from opset 9) and SequenceMap.

Bodies run through ``ctx.run_subgraph`` on the plans made at load, on the device. A condition or
trip count is read on the host (one small read-back each iteration); a Scan's slices are strided
copies and its per-iteration outputs are stacked by one copy each. As on the CPU, a Loop ends when
its body returns a false condition, and at most ``max_loop_iterations`` of the run's limits run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, ModelLimitError
from ..ir import TENSOR, Graph, Value
from ..limits import run_limits
from ..ops.defs.control import check_if, check_loop, check_scan, check_sequence_map
from ..tensor import TensorSequence
from .array import DeviceArray
from .host import to_host
from .shapes import axis_index
from .table import GPU_KERNELS, GPUContext, concatenate, index_along


def _flag(ctx: GPUContext, condition: DeviceArray) -> bool:
    return bool(to_host(ctx, condition).reshape(-1)[0])


def _feeds(body: Graph, values: Sequence[Any]) -> dict[str, Any]:
    return {value.name: given for value, given in zip(body.inputs, values, strict=True)}


def _stacked(ctx: GPUContext, parts: Sequence[DeviceArray], declared: Value, axis: int) -> DeviceArray:
    """Per-iteration outputs stacked on a new ``axis``; with none, an empty tensor of the declared
    type (its unknown dims 0, as onnxruntime does)."""
    if parts:
        rank = len(parts[0].shape) + 1
        axis = axis_index(axis, rank)
        return concatenate(ctx, [p.view((*p.shape[:axis], 1, *p.shape[axis:])) for p in parts], axis)
    if declared.kind != TENSOR or declared.dtype is None:
        raise InvalidArgumentError(
            f"no iterations ran and the body declares no element type for {declared.name!r}"
        )
    dims = [0] if declared.shape is None else [d if isinstance(d, int) else 0 for d in declared.shape]
    if declared.shape is not None:
        dims.insert(axis % (len(dims) + 1), 0)
    return ctx.backend.from_numpy(np.empty(dims, declared.dtype))


@GPU_KERNELS.register("If", check=check_if)
def if_(ctx: GPUContext, condition: DeviceArray) -> tuple[Any, ...]:
    branch = ctx.attrs["then_branch"] if _flag(ctx, condition) else ctx.attrs["else_branch"]
    assert ctx.run_subgraph is not None  # the planner gives nodes with bodies a runner
    return tuple(ctx.run_subgraph(branch, {}))


@GPU_KERNELS.register("Loop", check=check_loop)
def loop(
    ctx: GPUContext, trip_count: DeviceArray | None, condition: DeviceArray | None, *initial: Any
) -> tuple[Any, ...]:
    """``for i in range(trip_count) while condition``; either bound may be absent."""
    body: Graph = ctx.attrs["body"]
    assert ctx.run_subgraph is not None
    most = run_limits().max_loop_iterations
    limit = None if trip_count is None else int(to_host(ctx, trip_count).reshape(-1)[0])
    running = condition is None or _flag(ctx, condition)
    carried = list(initial)
    declared = body.outputs[1 + len(carried) :]
    scanned: list[list[DeviceArray]] = [[] for _ in declared]
    iteration = 0
    while running and (limit is None or iteration < limit):
        if iteration == most:
            raise ModelLimitError("loop iterations", iteration + 1, most, f"node {ctx.node.label()!r}")
        state = [
            ctx.backend.from_numpy(np.array(iteration, np.int64)),
            ctx.backend.from_numpy(np.array(running)),
        ]
        verdict, *results = ctx.run_subgraph(body, _feeds(body, [*state, *carried]))
        running = _flag(ctx, verdict)
        carried = results[: len(carried)]
        for parts, result in zip(scanned, results[len(carried) :], strict=True):
            parts.append(result)
        iteration += 1
    return (
        *carried,
        *(_stacked(ctx, parts, value, 0) for parts, value in zip(scanned, declared, strict=True)),
    )


@GPU_KERNELS.register("Scan", since=9, check=check_scan)
def scan(ctx: GPUContext, *inputs: DeviceArray) -> tuple[DeviceArray, ...]:
    body: Graph = ctx.attrs["body"]
    assert ctx.run_subgraph is not None
    count = ctx.attrs["num_scan_inputs"]
    split = len(inputs) - count
    outputs = len(body.outputs) - split
    axes = [
        axis_index(int(a), len(x.shape))
        for a, x in zip(ctx.attrs.get("scan_input_axes") or [0] * count, inputs[split:], strict=True)
    ]
    backward = ctx.attrs.get("scan_input_directions") or [0] * count
    lengths = {x.shape[axis] for x, axis in zip(inputs[split:], axes, strict=True)}
    if len(lengths) != 1:
        raise InvalidArgumentError(
            f"scan inputs have different lengths along their scan axes: {sorted(lengths)}"
        )
    length = lengths.pop()
    states = list(inputs[:split])
    parts: list[list[DeviceArray]] = [[] for _ in range(outputs)]
    for step in range(length):
        slices = [
            index_along(ctx, x, axis, length - 1 - step if back else step)
            for x, axis, back in zip(inputs[split:], axes, backward, strict=True)
        ]
        results = ctx.run_subgraph(body, _feeds(body, [*states, *slices]))
        states = results[:split]
        for collected, result in zip(parts, results[split:], strict=True):
            collected.append(result)
    out_axes = ctx.attrs.get("scan_output_axes") or [0] * outputs
    prepend = ctx.attrs.get("scan_output_directions") or [0] * outputs
    stacked = [
        _stacked(ctx, collected[::-1] if front else collected, value, int(axis))
        for collected, value, axis, front in zip(parts, body.outputs[split:], out_axes, prepend, strict=True)
    ]
    return (*states, *stacked)


@GPU_KERNELS.register("SequenceMap", since=17, check=check_sequence_map)
def sequence_map(ctx: GPUContext, first: TensorSequence, *extra: Any) -> tuple[TensorSequence, ...]:
    """The body applied to the i-th tensor of every sequence input and to every tensor input."""
    body: Graph = ctx.attrs["body"]
    assert ctx.run_subgraph is not None
    inputs = (first, *extra)
    lengths = {len(given) for given in inputs if isinstance(given, TensorSequence)}
    if len(lengths) != 1:
        raise InvalidArgumentError(f"the sequences to map have different lengths: {sorted(lengths)}")
    results = [
        ctx.run_subgraph(body, _feeds(body, [_item(given, index) for given in inputs]))
        for index in range(len(first))
    ]
    columns = list(zip(*results, strict=True)) if results else [()] * len(body.outputs)
    return tuple(
        TensorSequence(tuple(column), column[0].dtype if column else value.dtype)
        for column, value in zip(columns, body.outputs, strict=True)
    )


def _item(given: Any, index: int) -> Any:
    return given.items[index] if isinstance(given, TensorSequence) else given
