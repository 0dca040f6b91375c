"""Operators that only rearrange or pass through elements: DepthToSpace and SpaceToDepth (a view
and a transpose), ReverseSequence and Col2Im (one kernel each), TensorScatter (strided copies),
BitCast (a relabelling, re-wrapped for the narrow integers), and Dropout at inference (the input
itself, and a mask of ones)."""

from __future__ import annotations

import math

import numpy as np

from ..backend import CheckFn
from ..dtypes import from_onnx
from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.library.chain import Step, step
from ..kernel.library.movement import col2im, reverse_sequence
from ..ops.shapes import as_text, window_attrs
from .array import DeviceArray
from .fused import run_chain
from .host import to_host
from .shapes import axis_index, contiguous_strides
from .table import GPU_KERNELS, GPUContext, copy_strided, permuted

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


def _block(ctx: GPUContext, x: DeviceArray) -> tuple[int, str]:
    block = int(ctx.attrs["blocksize"])
    if len(x.shape) != 4 or block < 1:
        raise InvalidArgumentError(f"blocksize {block} on a tensor of shape {list(x.shape)}; 4-D NCHW wanted")
    return block, as_text(ctx.attrs.get("mode", "DCR"))


@GPU_KERNELS.register("DepthToSpace", check=_modes(11))
def depth_to_space(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    (block, mode), (n, c, h, w) = _block(ctx, x), x.shape
    depth = c // (block * block)
    if depth * block * block != c:
        raise InvalidArgumentError(f"{c} channels do not split into blocks of {block}x{block}")
    blocks = (n, block, block, depth, h, w) if mode == "DCR" else (n, depth, block, block, h, w)
    return permuted(ctx, x.view(blocks), _DEPTH_TO_SPACE[mode]).view((n, depth, h * block, w * block))


@GPU_KERNELS.register("SpaceToDepth", check=_modes(28))
def space_to_depth(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    (block, mode), (n, c, h, w) = _block(ctx, x), x.shape
    if h % block or w % block:
        raise InvalidArgumentError(f"a {h}x{w} image does not split into blocks of {block}x{block}")
    blocks = x.view((n, c, h // block, block, w // block, block))
    return permuted(ctx, blocks, _SPACE_TO_DEPTH[mode]).view((n, c * block * block, h // block, w // block))


def _inference(node: Node, opset: int) -> str | None:
    given = len(node.inputs) > 2 and bool(node.inputs[2])
    return "training_mode draws a random mask, which the GPU does not run" if given else None


@GPU_KERNELS.register("Dropout", check=_inference)
def dropout(ctx: GPUContext, x: DeviceArray, ratio: DeviceArray | None = None) -> tuple[DeviceArray, ...]:
    """At inference: ``x`` itself, and where asked a mask of ones (bool, the input's type before opset 10)."""
    if len(ctx.node.outputs) < 2 or not ctx.node.outputs[1]:
        return (x,)
    mask = np.ones(x.shape, np.bool_ if ctx.opset >= 10 else x.dtype)
    return x, ctx.backend.from_numpy(mask)


@GPU_KERNELS.register("ReverseSequence", since=10)
def reverse_sequence_(ctx: GPUContext, x: DeviceArray, lengths: DeviceArray) -> DeviceArray:
    """Each batch item's first ``lengths[b]`` steps reversed along ``time_axis``."""
    rank = len(x.shape)
    time, batch = (
        axis_index(int(ctx.attrs.get(a, d)), rank) for a, d in (("time_axis", 0), ("batch_axis", 1))
    )
    if rank < 2 or time == batch or lengths.shape != (x.shape[batch],):
        raise InvalidArgumentError(
            f"ReverseSequence of shape {list(x.shape)} along axis {time} with lengths {list(lengths.shape)}"
        )
    out = ctx.backend.empty(x.shape, x.dtype)
    strides = contiguous_strides(x.shape)
    scalars = {
        "time_size": x.shape[time],
        "time_stride": strides[time],
        "batch_size": x.shape[batch],
        "batch_stride": strides[batch],
    }
    ctx.backend.launch_flat(reverse_sequence.specialize(T=x.elem), [x, lengths, out], out.size, **scalars)
    return out


@GPU_KERNELS.register("Col2Im", since=18)
def col2im_(
    ctx: GPUContext, x: DeviceArray, image_shape: DeviceArray, block_shape: DeviceArray
) -> DeviceArray:
    """Sliding blocks ``(N, C * prod(block), L)`` summed back into images ``(N, C, *image)``."""
    image = [int(d) for d in to_host(ctx, image_shape).reshape(-1)]
    block = [int(d) for d in to_host(ctx, block_shape).reshape(-1)]
    rank = len(image)
    strides, dilations, pads = window_attrs(ctx.attrs, block)
    counts = [
        (size + pads[a] + pads[a + rank] - (k - 1) * d - 1) // s + 1
        for a, (size, k, d, s) in enumerate(zip(image, block, dilations, strides, strict=True))
    ]
    window = math.prod(block)
    if len(x.shape) != 3 or x.shape[1] % window or x.shape[2] != math.prod(counts) or min(counts) < 1:
        raise InvalidArgumentError(
            f"an input of shape {list(x.shape)} does not hold blocks {block} of an image {image}"
        )
    channels = x.shape[1] // window
    out = ctx.backend.empty((x.shape[0], channels, *image), x.dtype)
    if out.size:
        dims = ctx.backend.constant([*image, *counts, *block, *strides, *dilations, *pads[:rank]])
        k = col2im.specialize(T=x.elem, RANK=rank)
        scalars = {"C": channels, "image": math.prod(image), "window": window, "blocks": x.shape[2]}
        ctx.backend.launch_flat(k, [x, dims, out], out.size, **scalars)
    return out


def _check_tensor_scatter(node: Node, opset: int) -> str | None:
    mode = as_text(node.attrs.get("mode", "linear"))
    return None if mode in ("linear", "circular") else f"mode={mode!r} is not linear or circular"


@GPU_KERNELS.register("TensorScatter", since=24, check=_check_tensor_scatter)
def tensor_scatter(
    ctx: GPUContext, past: DeviceArray, update: DeviceArray, write_indices: DeviceArray | None = None
) -> DeviceArray:
    """A copy of the cache ``past`` with each batch item's ``update`` steps written along ``axis`` from
    its write index (wrapping around in ``circular`` mode): strided copies of contiguous runs."""
    rank = len(past.shape)
    axis = axis_index(int(ctx.attrs.get("axis", -2)), rank)
    if (
        axis == 0
        or update.shape[:axis] + update.shape[axis + 1 :] != past.shape[:axis] + past.shape[axis + 1 :]
    ):
        raise InvalidArgumentError(
            f"an update of shape {list(update.shape)} does not fit a cache of shape {list(past.shape)} "
            f"along axis {axis} (axis 0 is the batch)"
        )
    capacity, steps = past.shape[axis], update.shape[axis]
    starts = (
        [0] * past.shape[0]
        if write_indices is None
        else [int(s) for s in to_host(ctx, write_indices).reshape(-1)]
    )
    circular = as_text(ctx.attrs.get("mode", "linear")) == "circular"
    present = ctx.backend.empty(past.shape, past.dtype)
    ctx.backend.assign(present, past)
    source, target = contiguous_strides(update.shape), contiguous_strides(past.shape)
    for item, start in enumerate(starts):
        if not circular and not 0 <= start <= capacity - steps:
            raise InvalidArgumentError(f"writing {steps} steps at {start} overruns a cache of {capacity}")
        done = 0
        while done < steps:  # a contiguous run, up to the end of the cache when circular
            at = (start + done) % capacity
            run = min(steps - done, capacity - at)
            shape = [1, *update.shape[1:axis], run, *update.shape[axis + 1 :]]
            offsets = {
                "src_offset": item * source[0] + done * source[axis],
                "dst_offset": item * target[0] + at * target[axis],
            }
            copy_strided(ctx, update, present, shape, source, target, **offsets)
            done += run
    return present


#: The types BitCast reinterprets on the GPU: those held as their own bits (float32, int32) or
#: as their value in int32 (the 8- and 16-bit integers and bool, re-wrapped to the target's range).
BIT_CASTABLE = tuple(
    np.dtype(t) for t in (np.float32, np.int32, np.int8, np.uint8, np.int16, np.uint16, np.bool_)
)


def _check_bit_cast(node: Node, opset: int) -> str | None:
    target = from_onnx(int(node.attrs.get("to", 0)))
    return None if target in BIT_CASTABLE else f"bit casts to {target} are not run on the GPU"


@GPU_KERNELS.register("BitCast", since=26, check=_check_bit_cast, dtypes=BIT_CASTABLE)
def bit_cast(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    """The same bits as another type of their width: float32 and int32 share the device's bits,
    the narrower integers are wrapped into the target's range (``x & mask``, sign-extended)."""
    target = from_onnx(int(ctx.attrs["to"]))
    if target.itemsize != x.dtype.itemsize:
        raise InvalidArgumentError(f"BitCast from {x.dtype} to {target}: the widths differ")
    relabelled = DeviceArray(x.storage, x.shape, target)
    if target.itemsize == 4 or target == np.bool_ or not x.size:
        return relabelled
    bits = 8 * target.itemsize
    mask, half = _int32(ctx, 2**bits - 1), _int32(ctx, 2 ** (bits - 1))
    if np.issubdtype(target, np.unsignedinteger):
        steps: tuple[Step, ...] = (step("And", [0, 1], target.name),)
        return run_chain(ctx, steps, [relabelled, mask], "wrap_unsigned")
    steps = (step("Add", [0, 2], "int32"), step("And", [3, 1], "int32"), step("Sub", [4, 2], target.name))
    return run_chain(ctx, steps, [relabelled, mask, half], "wrap_signed")


def _int32(ctx: GPUContext, value: int) -> DeviceArray:
    return ctx.backend.from_numpy(np.array(value, np.int32))
