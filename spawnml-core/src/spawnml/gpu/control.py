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
from ..ir import TENSOR, Graph, Node, Value
from ..limits import run_limits
from ..tensor import TensorSequence
from .array import DeviceArray
from .table import GPU_KERNELS, GPUContext, _axis, _host, _strides, concatenate, copy_strided


def _flag(ctx: GPUContext, condition: DeviceArray) -> bool:
    return bool(_host(ctx, condition).reshape(-1)[0])


def _feeds(body: Graph, values: Sequence[Any]) -> dict[str, Any]:
    return {value.name: given for value, given in zip(body.inputs, values, strict=True)}


def _fits(what: str, body: Graph, inputs: int, outputs: int) -> str | None:
    """Why ``body`` cannot serve as ``what`` taking ``inputs`` and returning ``outputs`` values."""
    if len(body.inputs) != inputs or len(body.outputs) != outputs:
        return (
            f"{what} takes {len(body.inputs)} inputs and returns {len(body.outputs)} outputs; "
            f"the node needs {inputs} and {outputs}"
        )
    return None


def _stacked(ctx: GPUContext, parts: Sequence[DeviceArray], declared: Value, axis: int) -> DeviceArray:
    """Per-iteration outputs stacked on a new ``axis``; with none, an empty tensor of the declared
    type (its unknown dims 0, as onnxruntime does)."""
    if parts:
        rank = len(parts[0].shape) + 1
        axis = _axis(axis, rank)
        return concatenate(ctx, [p.view((*p.shape[:axis], 1, *p.shape[axis:])) for p in parts], axis)
    if declared.kind != TENSOR or declared.dtype is None:
        raise InvalidArgumentError(
            f"no iterations ran and the body declares no element type for {declared.name!r}"
        )
    dims = [0] if declared.shape is None else [d if isinstance(d, int) else 0 for d in declared.shape]
    if declared.shape is not None:
        dims.insert(axis % (len(dims) + 1), 0)
    return ctx.backend.from_numpy(np.empty(dims, declared.dtype))


def _branches_fit(node: Node, opset: int) -> str | None:
    for attr in ("then_branch", "else_branch"):
        if problem := _fits(attr, node.attrs[attr], 0, len(node.outputs)):
            return problem
    return None


@GPU_KERNELS.register("If", check=_branches_fit)
def if_(ctx: GPUContext, condition: DeviceArray) -> tuple[Any, ...]:
    branch = ctx.attrs["then_branch"] if _flag(ctx, condition) else ctx.attrs["else_branch"]
    assert ctx.run_subgraph is not None  # the planner gives nodes with bodies a runner
    return tuple(ctx.run_subgraph(branch, {}))


def _loop_fits(node: Node, opset: int) -> str | None:
    carried = len(node.inputs) - 2
    if len(node.outputs) < carried:
        return f"the loop carries {carried} values but has {len(node.outputs)} outputs"
    return _fits("body", node.attrs["body"], 2 + carried, 1 + len(node.outputs))


@GPU_KERNELS.register("Loop", check=_loop_fits)
def loop(
    ctx: GPUContext, trip_count: DeviceArray | None, condition: DeviceArray | None, *initial: Any
) -> tuple[Any, ...]:
    """``for i in range(trip_count) while condition``; either bound may be absent."""
    body: Graph = ctx.attrs["body"]
    assert ctx.run_subgraph is not None
    most = run_limits().max_loop_iterations
    limit = None if trip_count is None else int(_host(ctx, trip_count).reshape(-1)[0])
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


def _scan_fits(node: Node, opset: int) -> str | None:
    """Body arity, attribute lengths, and directions of 0 or 1."""
    scans = node.attrs["num_scan_inputs"]
    states = len(node.inputs) - scans
    if not 0 < scans <= len(node.inputs):
        return f"num_scan_inputs {scans} is not in 1..{len(node.inputs)}"
    if len(node.outputs) < states:
        return f"the scan carries {states} states but has {len(node.outputs)} outputs"
    listed = {
        "scan_input_axes": scans,
        "scan_input_directions": scans,
        "scan_output_axes": len(node.outputs) - states,
        "scan_output_directions": len(node.outputs) - states,
    }
    for attr, count in listed.items():
        values = node.attrs.get(attr)
        if values is not None and len(values) != count:
            return f"{attr} lists {len(values)} values for {count} tensors"
        if values is not None and "directions" in attr and not set(values) <= {0, 1}:
            return f"{attr} {list(values)} holds values other than 0 and 1"
    return _fits("body", node.attrs["body"], len(node.inputs), len(node.outputs))


def _slice(ctx: GPUContext, x: DeviceArray, axis: int, index: int) -> DeviceArray:
    """``x[..., index, ...]`` along ``axis``, as a new tensor without that axis."""
    shape = [d for i, d in enumerate(x.shape) if i != axis]
    strides = _strides(x.shape)
    out = ctx.backend.empty(shape, x.dtype)
    if out.size:
        source = [s for i, s in enumerate(strides) if i != axis]
        copy_strided(ctx, x, out, shape, source, _strides(shape), src_offset=index * strides[axis])
    return out


@GPU_KERNELS.register("Scan", since=9, check=_scan_fits)
def scan(ctx: GPUContext, *inputs: DeviceArray) -> tuple[DeviceArray, ...]:
    body: Graph = ctx.attrs["body"]
    assert ctx.run_subgraph is not None
    count = ctx.attrs["num_scan_inputs"]
    split = len(inputs) - count
    outputs = len(body.outputs) - split
    axes = [
        _axis(int(a), len(x.shape))
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
            _slice(ctx, x, axis, length - 1 - step if back else step)
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


def _map_fits(node: Node, opset: int) -> str | None:
    return _fits("body", node.attrs["body"], len(node.inputs), len(node.outputs))


@GPU_KERNELS.register("SequenceMap", since=17, check=_map_fits)
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
