"""Operators that only rearrange or pass through elements: DepthToSpace and SpaceToDepth (a view
and a transpose), ReverseSequence (one kernel), and Dropout at inference (the input itself, and a
mask of ones)."""

from __future__ import annotations

import numpy as np

from ..backend import CheckFn, KernelContext
from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.library.movement import reverse_sequence
from ..ops.shapes import as_text
from .array import DeviceArray
from .table import GPU_KERNELS, _axis, _strides, permuted

#: The axis orders of the blocks: (reshape to 6-D, transpose) for each mode.
_DEPTH_TO_SPACE = {"DCR": (0, 3, 4, 1, 5, 2), "CRD": (0, 1, 4, 2, 5, 3)}
_SPACE_TO_DEPTH = {"DCR": (0, 3, 5, 1, 2, 4), "CRD": (0, 1, 3, 5, 2, 4)}


def _modes(crd_since: int) -> CheckFn:
    """Refuses block modes other than DCR, and CRD before opset ``crd_since``."""

    def check(node: Node, opset: int) -> str | None:
        mode = as_text(node.attrs.get("mode", "DCR"))
        if mode == "DCR" or (mode == "CRD" and opset >= crd_since):
            return None
        return f"mode={mode!r} is not DCR{' or CRD' if opset >= crd_since else ''} at opset {opset}"

    return check


def _block(ctx: KernelContext, x: DeviceArray) -> tuple[int, str]:
    block = int(ctx.attrs["blocksize"])
    if len(x.shape) != 4 or block < 1:
        raise InvalidArgumentError(f"blocksize {block} on a tensor of shape {list(x.shape)}; 4-D NCHW wanted")
    return block, as_text(ctx.attrs.get("mode", "DCR"))


@GPU_KERNELS.register("DepthToSpace", check=_modes(11))
def depth_to_space(ctx: KernelContext, x: DeviceArray) -> DeviceArray:
    (block, mode), (n, c, h, w) = _block(ctx, x), x.shape
    depth = c // (block * block)
    if depth * block * block != c:
        raise InvalidArgumentError(f"{c} channels do not split into blocks of {block}x{block}")
    blocks = (n, block, block, depth, h, w) if mode == "DCR" else (n, depth, block, block, h, w)
    return permuted(ctx, x.view(blocks), _DEPTH_TO_SPACE[mode]).view((n, depth, h * block, w * block))


@GPU_KERNELS.register("SpaceToDepth", check=_modes(28))
def space_to_depth(ctx: KernelContext, x: DeviceArray) -> DeviceArray:
    (block, mode), (n, c, h, w) = _block(ctx, x), x.shape
    if h % block or w % block:
        raise InvalidArgumentError(f"a {h}x{w} image does not split into blocks of {block}x{block}")
    blocks = x.view((n, c, h // block, block, w // block, block))
    return permuted(ctx, blocks, _SPACE_TO_DEPTH[mode]).view((n, c * block * block, h // block, w // block))


def _inference(node: Node, opset: int) -> str | None:
    given = len(node.inputs) > 2 and bool(node.inputs[2])
    return "training_mode draws a random mask, which the GPU does not run" if given else None


@GPU_KERNELS.register("Dropout", check=_inference)
def dropout(ctx: KernelContext, x: DeviceArray, ratio: DeviceArray | None = None) -> tuple[DeviceArray, ...]:
    """At inference: ``x`` itself, and where asked a mask of ones (bool, the input's type before opset 10)."""
    if len(ctx.node.outputs) < 2 or not ctx.node.outputs[1]:
        return (x,)
    mask = np.ones(x.shape, np.bool_ if ctx.opset >= 10 else x.dtype)
    return x, ctx.backend.from_numpy(mask)


@GPU_KERNELS.register("ReverseSequence", since=10)
def reverse_sequence_(ctx: KernelContext, x: DeviceArray, lengths: DeviceArray) -> DeviceArray:
    """Each batch item's first ``lengths[b]`` steps reversed along ``time_axis``."""
    rank = len(x.shape)
    time, batch = (_axis(int(ctx.attrs.get(a, d)), rank) for a, d in (("time_axis", 0), ("batch_axis", 1)))
    if rank < 2 or time == batch or lengths.shape != (x.shape[batch],):
        raise InvalidArgumentError(
            f"ReverseSequence of shape {list(x.shape)} along axis {time} with lengths {list(lengths.shape)}"
        )
    out = ctx.backend.empty(x.shape, x.dtype)
    strides = _strides(x.shape)
    scalars = {
        "time_size": x.shape[time],
        "time_stride": strides[time],
        "batch_size": x.shape[batch],
        "batch_stride": strides[batch],
    }
    ctx.backend.launch_flat(reverse_sequence.specialize(T=x.elem), [x, lengths, out], out.size, **scalars)
    return out
