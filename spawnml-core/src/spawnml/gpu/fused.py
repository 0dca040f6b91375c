"""Generated elementwise kernels: a chain of scalar operators in one dispatch.

``ai.spawnml::FusedElementwise`` (what the elementwise fusion pass makes) runs its chain
here, and single operators without a hand-written map run as chains of one step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..backend import KernelContext
from ..kernel.library.chain import Chain, chain_kernel, decode
from ..ops.defs.fused import DOMAIN
from .array import DeviceArray, physical
from .table import GPU_KERNELS, _broadcast_strides


def run_chain(ctx: KernelContext, chain: Chain, inputs: Sequence[DeviceArray], name: str) -> DeviceArray:
    """The last step of ``chain`` over ``inputs`` broadcast against each other, in one launch."""
    shape = np.broadcast_shapes(*(x.shape for x in inputs))
    out = ctx.backend.empty(shape, np.dtype(chain[-1].dtype))
    if not out.size:
        return out
    strided = tuple(x.size != out.size for x in inputs)
    types = tuple(physical(np.dtype(s.dtype)) for s in chain)
    k = chain_kernel(name, chain, tuple(x.elem for x in inputs), types, len(shape), strided)
    buffers = [*inputs, out]
    if any(strided):
        rows = [_broadcast_strides(x.shape, shape) for x, wide in zip(inputs, strided, strict=True) if wide]
        buffers.append(ctx.backend.constant([*shape, *(s for row in rows for s in row)]))
    ctx.backend.launch_flat(k, buffers, out.size)
    return out


@GPU_KERNELS.register("FusedElementwise", DOMAIN)
def fused_elementwise(ctx: KernelContext, *inputs: DeviceArray) -> DeviceArray:
    return run_chain(ctx, decode(ctx.attrs["chain"], len(inputs)), inputs, "fused_elementwise")
