"""``spawnml.gguf::QuantizedMatMul`` and ``QuantizedGather`` on the GPU: the raw GGUF blocks bound
as ``u32`` words and dequantized inside the kernel (:mod:`spawnml.kernel.library.gguf`); the whole
weight is never expanded (a prefill's product expands a window of rows at a time, on the device).

A weight's words are uploaded once, the first time a product reads it, and kept while its device
buffer lives (a session's initializers live as long as the session).
"""

from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.library.gguf import LAYOUTS, block_kernel
from ..ops.defs.quant_gguf import DOMAIN, block_problem
from ..ops.shapes import as_text
from .array import DeviceArray, Storage
from .gemm import times_transposed
from .runtime import Runtime
from .table import FLOATS, GPU_KERNELS, GPUContext, copy_strided

#: Activation rows up to which a product decodes the weight in the product kernel; above (a
#: prefill), :data:`ROW_CHUNK` weight rows at a time are decoded once to float32 on the device and
#: multiplied as floats, rather than decoded again for each activation row.
DIRECT_ROWS = 8
ROW_CHUNK = 4096


#: Elements a block of each block type the GPU reads.
_BLOCK_SIZES = {name: layout.size for name, layout in LAYOUTS.items()}


def _check(node: Node, opset: int) -> str | None:
    return block_problem(node, _BLOCK_SIZES, "the GPU")


#: The words of each weight read so far, by its device buffer, its offset and its size.
_words: weakref.WeakKeyDictionary[Storage, dict[tuple[int, int], DeviceArray]] = weakref.WeakKeyDictionary()
_uploading = threading.Lock()


def weight_words(ctx: GPUContext, w: DeviceArray) -> DeviceArray:
    """``w``'s bytes as ``u32`` words on the device (zero-padded to a whole word), uploaded once."""
    with _uploading:
        known = _words.setdefault(w.storage, {})
        words = known.get((w.offset, w.size))
        if words is None:
            data = np.ascontiguousarray(w.host if w.host is not None else ctx.backend.to_numpy(w)).reshape(-1)
            if data.size % 4:
                data = np.concatenate([data, np.zeros(4 - data.size % 4, np.uint8)])
            words = known[w.offset, w.size] = ctx.backend.from_numpy(data.view(np.uint32))
        return words


def splits_outputs(runtime: Runtime) -> bool:
    """Whether a workgroup shares each output: not on devices that run on the CPU, which switch
    between invocations at each barrier; there each invocation takes a whole output, and the
    workgroup's invocations take neighbouring ones."""
    return not runtime.on_cpu


def _launch(
    ctx: GPUContext, x: DeviceArray, w: DeviceArray, shape: tuple[int, ...], gather: bool
) -> DeviceArray:
    """One workgroup for each output of the product, or for each row gathered: :func:`gguf_matmul`."""
    quant_type, rows, cols = as_text(ctx.attrs["quant_type"]), ctx.attrs["rows"], ctx.attrs["cols"]
    layout = LAYOUTS[quant_type]
    row_bytes = cols // layout.size * layout.bytes
    if w.dtype != np.uint8 or w.size != rows * row_bytes:
        raise InvalidArgumentError(
            f"W is {w.dtype} {list(w.shape)}, not uint8 [{rows}, {row_bytes}] of {quant_type} blocks"
        )
    y = ctx.backend.empty(shape, np.dtype(np.float32) if gather else x.dtype)
    outputs = x.size if gather else math.prod(shape)
    if not outputs:
        return y
    split = splits_outputs(ctx.backend.runtime)
    kernel = block_kernel(quant_type, gather, split)
    groups = outputs if split else -(-outputs // kernel.workgroup[0])
    across = min(groups, ctx.backend.runtime.max_groups)
    scalars = {"outputs_total": outputs, "across": across, "rows": rows, "cols": cols, "row_bytes": row_bytes}
    ctx.backend.launch(kernel, [x, weight_words(ctx, w), y], (across, -(-groups // across)), **scalars)
    return y


@GPU_KERNELS.register("QuantizedMatMul", domain=DOMAIN, check=_check, dtypes=FLOATS)
def quantized_matmul(ctx: GPUContext, a: DeviceArray, w: DeviceArray) -> DeviceArray:
    """``a @ dequantize(w)^T``, float32 sums, in ``a``'s type."""
    cols = ctx.attrs["cols"]
    if a.shape[-1:] != (cols,):
        raise InvalidArgumentError(f"A of shape {list(a.shape)} does not end in the weight's {cols} columns")
    rows, count = ctx.attrs["rows"], math.prod(a.shape[:-1])
    if count <= DIRECT_ROWS:
        return _launch(ctx, a, w, (*a.shape[:-1], rows), gather=False)
    flat = a.view((count, cols))
    parts = []
    for start in range(0, rows, ROW_CHUNK):
        indices = ctx.backend.constant(np.arange(start, min(start + ROW_CHUNK, rows)), np.int32)
        parts.append(times_transposed(ctx, flat, _launch(ctx, indices, w, (indices.size, cols), gather=True)))
    if len(parts) == 1:
        return parts[0].view((*a.shape[:-1], rows))
    y = ctx.backend.empty((count, rows), a.dtype)
    for start, part in zip(range(0, rows, ROW_CHUNK), parts, strict=True):
        copy_strided(ctx, part, y, part.shape, (part.shape[1], 1), (rows, 1), dst_offset=start)
    return y.view((*a.shape[:-1], rows))


@GPU_KERNELS.register("QuantizedGather", domain=DOMAIN, check=_check)
def quantized_gather(ctx: GPUContext, w: DeviceArray, indices: DeviceArray) -> DeviceArray:
    """The rows ``indices`` of ``w``, dequantized: ``[*indices.shape, cols]`` float32."""
    rows = ctx.attrs["rows"]
    if indices.dtype.kind not in "iu":
        raise InvalidArgumentError(f"QuantizedGather indices must be integers, not {indices.dtype}")
    if indices.host is not None and indices.size and (indices.host.min() < 0 or indices.host.max() >= rows):
        raise InvalidArgumentError(
            f"QuantizedGather indices must lie in [0, {rows}), not {indices.host.min()}..{indices.host.max()}"
        )
    return _launch(ctx, indices, w, (*indices.shape, ctx.attrs["cols"]), gather=True)
